"""The gateway bounded against its engine (issue 38): forwarded GETs against an engine that does not answer, and
answers larger than any client should get (an SSE event that never ends, a whole body of tens of MB). Each through
the real gateway process in front of a scripted engine (tests/llm/scripted_engine.py), over raw sockets."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.scripted_engine import SSE_HEAD, ScriptedEngine, chunk, run_scripted_engine
from tests.llm.stack import GatewayProcess, run_gateway, wait_until
from tests.llm.test_gateway_bounds import completion, connect, dechunk, exchange, openai_error, request, statuses
from tools.attack_gateway import read_all

LOOKUPS = 4
LOOKUP_TIMEOUT_S = 2.0
SLACK_S = 5.0  # what a bound may overrun by on two shared cores
EVENT_BOUND = 1 << 20
FLOOD_BYTES = 48 << 20  # what the engine sends past the bound: far more than the gateway may hold
PIECE = 64 << 10
MIB = 1 << 20


def never_answers(method: str, path: str, sock: socket.socket) -> None:
    """An engine whose loop is stuck: it reads the request and answers nothing until the connection ends."""
    while sock.recv(65536):
        pass


@pytest.fixture
def silent_engine() -> Iterator[ScriptedEngine]:
    with run_scripted_engine(never_answers) as engine:
        yield engine


def ask_concurrently(gateway: GatewayProcess, raw: bytes, count: int) -> list[tuple[bytes, float]]:
    """`count` clients send `raw` at once; each one's answer (until the close) and the seconds it took."""
    answers: list[tuple[bytes, float]] = [(b"", 0.0)] * count

    def one(index: int) -> None:
        with connect(gateway) as sock:
            started = time.monotonic()
            sock.sendall(raw)
            answer, _ = read_all(sock, LOOKUP_TIMEOUT_S + 3 * SLACK_S)
            answers[index] = (answer, time.monotonic() - started)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


# Forwarded GETs: a small bound of their own, a deadline, the excess refused at once, /health untouched.
@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/standin"])
def test_lookups_against_an_engine_that_never_answers_are_bounded(
    silent_engine: ScriptedEngine, tmp_path: Path, path: str
):
    env = {"MAX_CONCURRENT_LOOKUPS": str(LOOKUPS), "LOOKUP_TIMEOUT_S": str(LOOKUP_TIMEOUT_S)}
    with run_gateway(silent_engine.url, tmp_path, env) as gateway:
        clients = 3 * LOOKUPS
        results: list[tuple[bytes, float]] = []
        raw = request("GET", path)
        flood = threading.Thread(target=lambda: results.extend(ask_concurrently(gateway, raw, clients)))
        flood.start()
        wait_until(lambda: silent_engine.connections >= LOOKUPS, 15, "the lookups to reach the engine")
        health = exchange(gateway, request("GET", "/health"))
        flood.join(60)
        log = gateway.tail()
    assert statuses(health) == [200]
    answered = {status: [a for a, _ in results if statuses(a) == [status]] for status in (429, 503)}
    assert len(answered[429]) == clients - LOOKUPS, [a[:120] for a, _ in results]
    assert len(answered[503]) == LOOKUPS, [a[:120] for a, _ in results]
    for answer in answered[429] + answered[503]:
        assert b"retry-after: 1" in answer.lower()
        assert openai_error(answer)["type"] in {"rate_limit_error", "service_unavailable"}
    assert "did not answer within 2 s" in openai_error(answered[503][0])["message"]
    assert max(elapsed for _, elapsed in results) < LOOKUP_TIMEOUT_S + SLACK_S
    # One engine connection per admitted lookup: the flood cannot spend the gateway's open files.
    assert silent_engine.connections == LOOKUPS
    assert log.count('"message": "engine lookup refused"') == clients - LOOKUPS, log
    assert log.count('"message": "engine lookup timed out"') == LOOKUPS, log


# An engine event that never ends, and bodies larger than the bound.
def endless_event(method: str, path: str, sock: socket.socket) -> None:
    """A stream whose first event is fine and whose second never ends (FLOOD_BYTES with no blank line)."""
    sock.sendall(SSE_HEAD + chunk(b'data: {"choices":[{"index":0,"text":" tok"}]}\n\n') + chunk(b"data: "))
    for _ in range(FLOOD_BYTES // PIECE):
        sock.sendall(chunk(b"a" * PIECE))
    sock.sendall(chunk(b"\n\n") + b"0\r\n\r\n")


def huge_body(method: str, path: str, sock: socket.socket) -> None:
    """A whole answer of FLOOD_BYTES, announced by its content-length (/v1/models too)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % FLOOD_BYTES)
    for _ in range(FLOOD_BYTES // PIECE):
        sock.sendall(b" " * PIECE)


def huge_chunked_body(method: str, path: str, sock: socket.socket) -> None:
    """A whole answer of FLOOD_BYTES in chunks, its size not announced."""
    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
    for _ in range(FLOOD_BYTES // PIECE):
        sock.sendall(chunk(b" " * PIECE))
    sock.sendall(b"0\r\n\r\n")


def memory_mib(gateway: GatewayProcess, field: str) -> float:
    """The gateway process's VmRSS or VmHWM (its peak), in MiB."""
    for line in Path(f"/proc/{gateway.process.pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{gateway.process.pid}/status")


BOUNDED = {"MAX_ENGINE_EVENT_BYTES": str(EVENT_BOUND), "MAX_ENGINE_BODY_BYTES": str(EVENT_BOUND)}


def test_an_engine_event_that_never_ends_ends_the_stream_with_an_error(tmp_path: Path):
    with run_scripted_engine(endless_event) as engine, run_gateway(engine.url, tmp_path, BOUNDED) as gateway:
        before = memory_mib(gateway, "VmRSS")
        answer = exchange(gateway, request("POST", "/v1/completions", completion(stream=True)))
        peak = memory_mib(gateway, "VmHWM")
        log = gateway.tail()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert statuses(head) == [200]
    events = [event for event in dechunk(body).split(b"\n\n") if event]
    assert events[0] == b'data: {"choices":[{"index":0,"text":" tok"}]}'
    error = json.loads(events[-1].removeprefix(b"data: "))["error"]
    assert error["code"] == 502
    assert f"larger than {EVENT_BOUND} bytes" in error["message"]
    assert len(events) == 2, "the unfinished event is dropped, not forwarded"
    # The engine sent 48 MiB; the gateway held about the bound (Python's allocator keeps some of it).
    assert peak - before < 24, f"{before:.0f} MiB before, peak {peak:.0f} MiB"
    assert '"message": "engine answer too large"' in log, log


@pytest.mark.parametrize(
    ("script", "path"),
    [
        pytest.param(huge_body, "/v1/completions", id="content-length"),
        pytest.param(huge_chunked_body, "/v1/completions", id="chunked"),
        pytest.param(huge_body, "/v1/models", id="lookup"),
    ],
)
def test_a_whole_answer_over_the_bound_is_a_502(tmp_path: Path, script, path: str):
    with run_scripted_engine(script) as engine, run_gateway(engine.url, tmp_path, BOUNDED) as gateway:
        before = memory_mib(gateway, "VmRSS")
        raw = request("POST", path, completion()) if path == "/v1/completions" else request("GET", path)
        answer = exchange(gateway, raw)
        peak = memory_mib(gateway, "VmHWM")
        log = gateway.tail()
    assert statuses(answer) == [502]
    error = openai_error(answer)
    assert error["type"] == "upstream_error"
    assert f"larger than {EVENT_BOUND} bytes" in error["message"]
    assert peak - before < 24, f"{before:.0f} MiB before, peak {peak:.0f} MiB"
    assert '"message": "engine answer too large"' in log, log


def test_the_open_file_budget_counts_the_engine_connections() -> None:
    """The gateway's open files are its clients' connections and its engine's: a limit that holds MAX_CONNECTIONS
    but not the engine connections the admission and lookup bounds allow stops the start, naming both."""
    import resource
    import subprocess
    import sys

    def low_hard_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (700, 700))

    env = {
        "PATH": "/usr/bin:/bin",
        "UPSTREAM_URL": "http://127.0.0.1:9",
        "MAX_CONNECTIONS": "600",
        "MAX_CONCURRENT_REQUESTS": "64",
    }
    result = subprocess.run(
        [sys.executable, "-m", "llm_gateway"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=low_hard_limit,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: MAX_CONNECTIONS=600 and 76 upstream connections need 740 open files"), line


# The engine client's own bounds: it reads the engine's socket only as the client takes the answer, and however many
# probes come, the readiness checks hold one engine connection.
def test_a_client_that_does_not_read_holds_back_the_engine_not_the_gateways_memory(tmp_path: Path):
    sent = [0]

    def endless_stream(method: str, path: str, sock: socket.socket) -> None:
        """Whole small events, as fast as the gateway takes them, counted as they leave."""
        sock.sendall(SSE_HEAD)
        piece = chunk(b'data: {"choices":[{"index":0,"text":" tok"}]}\n\n' * 64)
        while sent[0] < FLOOD_BYTES:
            sock.sendall(piece)
            sent[0] += len(piece)

    # No bound cuts the client while it sits (WRITE_TIMEOUT_S, DELIVERY_WAIT_S): only the backpressure holds.
    patient = {"WRITE_TIMEOUT_S": "120", "DELIVERY_WAIT_S": "120"}
    with run_scripted_engine(endless_stream) as engine, run_gateway(engine.url, tmp_path, patient) as gateway:
        before = memory_mib(gateway, "VmRSS")
        with connect(gateway, rcvbuf=4096) as sock:
            sock.sendall(request("POST", "/v1/completions", completion(stream=True)))
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            # The engine fills the socket buffers between it and the client, and then waits.
            wait_until(lambda: sent[0] > 0, 15, "the engine to start")
            settled, last = 0, -1
            while settled < 3:  # the same count three times, a second apart: the engine's writes are stuck
                time.sleep(1.0)
                settled, last = (settled + 1, last) if sent[0] == last else (0, sent[0])
            held = sent[0]
            peak = memory_mib(gateway, "VmHWM")
    # Loopback socket buffers hold a few MiB each way (tcp_wmem, tcp_rmem); the gateway itself one read or so.
    assert held < FLOOD_BYTES // 2, f"the engine wrote {held / MIB:.0f} MiB to a client that read nothing"
    assert peak - before < 24, f"{before:.0f} MiB before, peak {peak:.0f} MiB"


def test_a_flood_of_readiness_probes_holds_one_engine_connection(silent_engine: ScriptedEngine, tmp_path: Path):
    probes = 24
    with run_gateway(silent_engine.url, tmp_path) as gateway:
        answers = ask_concurrently(gateway, request("GET", "/readiness"), probes)
        health = exchange(gateway, request("GET", "/health"))
    assert statuses(health) == [200]
    assert [statuses(answer) for answer, _ in answers] == [[503]] * probes
    assert all("does not answer yet" in str(openai_error(answer)["message"]) for answer, _ in answers)
    # The probes that came while a check waited shared it; later ones (the machine is slow) start at most a few more.
    assert silent_engine.connections <= 3, silent_engine.connections
