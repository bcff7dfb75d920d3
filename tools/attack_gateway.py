"""An attack on the LLM gateway over loopback: the findings of issues 25 and 38 and more, one line per case.

    python -m tools.attack_gateway                          # a gateway in front of the full-speed stand-in engine
    python -m tools.attack_gateway --upstream http://127.0.0.1:8001 --model tiny-llama   # the real CPU engine
    python -m tools.attack_gateway --upstream unix:/tmp/e/vllm.sock --model tiny-llama   # ... on its socket

It starts its own gateway (`python -m llm_gateway`, tight bounds so that each case ends in seconds) on a free
loopback port, in front of the stand-in engine (llm_bench/standin_engine.py, at full speed, reached over a Unix
socket as a pod's gateway reaches vLLM) or of `--upstream`, and more in front of engines that never accept a
connection (over TCP and over a Unix socket). Every case is bounded in time and
count; the whole run stops by itself (a couple of minutes). Prints one row per case and the counts; exits 1 if
a case failed. Loopback only: it refuses any other host.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llm_gateway.engine_address import socket_path

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 2.0  # the gateway's header, body and write timeouts in this run
SLACK_S = 3.0  # what a bound may overrun by on a busy machine
LIMIT = 4  # sequences in flight
GATEWAY_ENV = {
    "HEADER_TIMEOUT_S": str(BOUND_S),
    "BODY_TIMEOUT_S": str(BOUND_S),
    "WRITE_TIMEOUT_S": str(BOUND_S),
    "MAX_CONCURRENT_REQUESTS": str(LIMIT),
    "MAX_CONNECTIONS": "64",
    "UPSTREAM_CONNECT_TIMEOUT_S": "0.5",
    "MAX_HEADER_BYTES": "16384",
    "DELIVERY_WAIT_S": str(BOUND_S),
    "MAX_CONCURRENT_LOOKUPS": "2",
    "LOOKUP_TIMEOUT_S": str(BOUND_S),
    "MAX_ENGINE_EVENT_BYTES": str(1 << 20),
}
COMPLETIONS = "/v1/completions"


@dataclass
class Target:
    """Where the attack goes: the gateway's address, the model it serves, and the `max_tokens` of a long stream
    (within the model's context: the stand-in has none, the tiny model's is 4,096 tokens)."""

    host: str
    port: int
    model: str
    long_tokens: int = 2_000_000

    def body(self, **fields: object) -> bytes:
        """A completion request's JSON body: a short prompt, 8 tokens, plus `fields`."""
        return json.dumps({"model": self.model, "prompt": "hello there", "max_tokens": 8, **fields}).encode()


def connect(target: Target, timeout_s: float = 10.0, rcvbuf: int | None = None) -> socket.socket:
    """A fresh TCP connection to the gateway (optionally with a small receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout_s)
    sock.connect((target.host, target.port))
    return sock


def read_all(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Everything until the server closes (or `limit_s`), and the seconds it took."""
    started = time.monotonic()
    received = b""
    sock.settimeout(0.5)
    while time.monotonic() - started < limit_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionError:
            break
        if not chunk:
            break
        received += chunk
    return received, time.monotonic() - started


def exchange(target: Target, raw: bytes, limit_s: float = 10.0) -> bytes:
    """Send `raw` on a fresh connection; what comes back until the close (or `limit_s`)."""
    with connect(target) as sock:
        sock.sendall(raw)
        return read_all(sock, limit_s)[0]


def request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 request that asks the server to close after answering."""
    lines = [f"{method} {path} HTTP/1.1", "host: gateway", "connection: close"]
    if body or method == "POST":
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def status_of(answer: bytes) -> int | None:
    """The final status code of a raw answer (after any 100 Continue), or None."""
    for line in answer.split(b"\r\n"):
        if line.startswith(b"HTTP/1.1 ") and not line.startswith(b"HTTP/1.1 100"):
            return int(line.split()[1])
    return None


def openai_error(answer: bytes) -> bool:
    """True when the answer's body is the gateway's (OpenAI's) error shape."""
    body = answer.partition(b"\r\n\r\n")[2]
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and {"message", "type", "code"} <= error.keys()


def expect(condition: bool, detail: str) -> str | None:
    """None when `condition` holds; else `detail` (the case fails with it)."""
    return None if condition else detail


def status_case(raw: bytes, wanted: set[int], shape: bool = True) -> Callable[[Target], str | None]:
    """A case: `raw` gets one of `wanted`, in the gateway's error shape when `shape`."""

    def case(target: Target) -> str | None:
        answer = exchange(target, raw)
        status = status_of(answer)
        if status not in wanted:
            return f"status {status}: {answer[:160]!r}"
        return expect(not shape or openai_error(answer), f"not the OpenAI error shape: {answer[:200]!r}")

    return case


def closed_within(send: Callable[[socket.socket], None], bound_s: float) -> Callable[[Target], str | None]:
    """A case: after `send`, the gateway closes the connection within `bound_s` (+ slack)."""

    def case(target: Target) -> str | None:
        with connect(target) as sock:
            started = time.monotonic()
            send(sock)
            answer, _ = read_all(sock, bound_s + SLACK_S + 5)
            elapsed = time.monotonic() - started
        return expect(elapsed <= bound_s + SLACK_S, f"still open after {elapsed:.1f} s ({answer[:80]!r})")

    return case


def trickle(data: bytes, every_s: float, for_s: float) -> Callable[[socket.socket], None]:
    """Send `data` one byte every `every_s`, for at most `for_s` (stops when the server closes)."""

    def send(sock: socket.socket) -> None:
        started = time.monotonic()
        for byte in data:
            if time.monotonic() - started > for_s:
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(every_s)

    return send


def non_readers_lose_their_slots(target: Target) -> str | None:
    """LIMIT clients that never read a long stream: once their buffers are full and the write timeout has passed
    (within 15 s on a loaded machine), others are served again."""
    hogs = []
    for _ in range(LIMIT):
        sock = connect(target, rcvbuf=4096)
        sock.sendall(request("POST", COMPLETIONS, target.body(max_tokens=target.long_tokens, stream=True)))
        hogs.append(sock)
    try:
        started = time.monotonic()
        while time.monotonic() - started < 15:
            answer = exchange(target, request("POST", COMPLETIONS, target.body()))
            if status_of(answer) == 200:
                return None
            time.sleep(0.5)
        return f"still refused after 15 s: {answer[:160]!r}"
    finally:
        for sock in hogs:
            sock.close()


def slow_reader_case(upstream: str, env: dict[str, str]) -> Callable[[Target], str | None]:
    """11: n=LIMIT read at about 40 KB/s by a gateway of its own with the default WRITE_TIMEOUT_S (30 s), which a
    reader that keeps reading never meets: once its answer has waited DELIVERY_WAIT_S in all, the slots are free
    (within 15 s on a loaded machine)."""

    def case(target: Target) -> str | None:
        with run_gateway(upstream, {**env, "WRITE_TIMEOUT_S": "30"}) as port:
            other = Target(target.host, port, target.model, target.long_tokens)
            with connect(other, rcvbuf=4096) as slow:
                body = other.body(n=LIMIT, max_tokens=other.long_tokens, stream=True)
                slow.sendall(request("POST", COMPLETIONS, body))
                started = time.monotonic()
                while time.monotonic() - started < 15:
                    slow.recv(4096)
                    time.sleep(0.1)
                    if status_of(exchange(other, request("POST", COMPLETIONS, other.body()))) == 200:
                        return None
        return "the slow reader still held every slot after 15 s"

    return case


def big_head_refused(target: Target) -> str | None:
    """A 16 MB header: a 431 (or a reset, if the close comes while the client still sends), never read whole."""
    with connect(target) as sock:
        with suppress(OSError):
            sock.sendall(request("GET", "/health", headers={"x-pad": "a" * (16 << 20)}))
        with suppress(OSError):
            answer, _ = read_all(sock, 5)
            return expect(status_of(answer) in {431, None} and b"alive" not in answer, f"{answer[:120]!r}")
    return None


def stream_of(target: Target, stream: object) -> str | None:
    answer = exchange(target, request("POST", COMPLETIONS, target.body(stream=stream)))
    return expect(status_of(answer) == 400 and openai_error(answer), f"stream={stream!r}: {answer[:160]!r}")


def pipelined_at_the_limit(target: Target) -> str | None:
    """LIMIT connections, each with streams pipelined back to back: none is refused (the slot is free in time)."""
    failures: list[str] = []

    def client() -> None:
        one = request("POST", COMPLETIONS, target.body(stream=True, max_tokens=4)).replace(
            b"connection: close\r\n", b""
        )
        with connect(target) as sock:
            sock.sendall(one * 5 + request("GET", "/health"))
            answer, _ = read_all(sock, 20)
        statuses = [int(line.split()[1]) for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
        if statuses != [200] * 6:
            failures.append(str(statuses))

    threads = [threading.Thread(target=client) for _ in range(LIMIT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return expect(not failures, f"statuses per connection: {failures}")


def sequences_counted(target: Target) -> str | None:
    """With LIMIT - 1 sequences streaming, a request for 2 more is refused (429), one for 1 is served."""
    hogs = []
    try:
        for _ in range(LIMIT - 1):
            sock = connect(target)
            sock.sendall(request("POST", COMPLETIONS, target.body(max_tokens=target.long_tokens, stream=True)))
            sock.recv(1)
            hogs.append(sock)
        two = exchange(target, request("POST", COMPLETIONS, target.body(n=2)))
        one = exchange(target, request("POST", COMPLETIONS, target.body(n=1)))
    finally:
        for sock in hogs:
            sock.close()
    return expect((status_of(two), status_of(one)) == (429, 200), f"n=2: {status_of(two)}, n=1: {status_of(one)}")


def connections_flood(target: Target) -> str | None:
    """200 idle connections (over MAX_CONNECTIONS): /health still answers within 2 s."""
    socks = []
    try:
        for _ in range(200):
            with suppress(OSError):
                socks.append(connect(target, timeout_s=2))
        started = time.monotonic()
        answer = exchange(target, request("GET", "/health"), limit_s=5)
        elapsed = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    return expect(status_of(answer) == 200 and elapsed < 2, f"/health {status_of(answer)} in {elapsed:.1f} s")


def request_id_echo(target: Target) -> str | None:
    """An acceptable X-Request-Id is passed on; a long one is refused before it becomes the response's id."""
    long = exchange(target, request("POST", COMPLETIONS, target.body(), {"x-request-id": "a" * 8000}))
    if status_of(long) != 400 or b"a" * 200 in long:
        return f"an 8,000-byte X-Request-Id: {long[:160]!r}"
    fine = exchange(target, request("POST", COMPLETIONS, target.body(), {"x-request-id": "trace-1"}))
    return expect(status_of(fine) == 200, f"X-Request-Id: trace-1: {fine[:160]!r}")


def body_cases(target: Target) -> dict[str, Callable[[Target], str | None]]:
    """The cases about request bodies, JSON and the generation's parameters."""
    deep = b'{"model": "m", "prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    prompts = json.dumps({"model": target.model, "prompt": ["hi"] * 64, "max_tokens": 4}).encode()
    return {
        "7 stream 'true' (a string) is a 400": lambda t: stream_of(t, "true"),
        "7 stream 'yes' is a 400": lambda t: stream_of(t, "yes"),
        "7 stream 1 is a 400": lambda t: stream_of(t, 1),
        "7 stream {} is a 400": lambda t: stream_of(t, {}),
        "8 JSON nested 5,000 deep is a 400": status_case(request("POST", COMPLETIONS, deep), {400}),
        "8 JSON nested 100,000 deep is a 400 (or 413)": status_case(
            request("POST", COMPLETIONS, b"[" * 100_000), {400, 413}
        ),
        "4 n=64 alone is a 400": status_case(request("POST", COMPLETIONS, target.body(n=64)), {400}),
        "4 best_of=64 alone is a 400": status_case(request("POST", COMPLETIONS, target.body(best_of=64)), {400}),
        "4 64 prompts alone are a 400": lambda t: expect(
            b"sequences" in (a := exchange(t, request("POST", COMPLETIONS, prompts))), f"{a[:200]!r}"
        ),
        "4 n=2 beside 3 streams is a 429": sequences_counted,
        "n: 'many' is no 500": status_case(request("POST", COMPLETIONS, target.body(n="many")), {400}, shape=False),
        "stream_options: [] is no 500": lambda t: expect(
            status_of(exchange(t, request("POST", COMPLETIONS, t.body(stream=True, stream_options=[])))) in {200, 400},
            "a 500",
        ),
        "invalid JSON is a 400": status_case(request("POST", COMPLETIONS, b"{nope"), {400}),
        "a JSON list is a 400": status_case(request("POST", COMPLETIONS, b"[1]"), {400}),
        "a 2 MB body is a 413": status_case(request("POST", COMPLETIONS, b" " * 2_000_000), {413}),
        "a chunked body over the limit is a 413": status_case(
            b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            + (b"100000\r\n" + b" " * 0x100000 + b"\r\n") * 2
            + b"0\r\n\r\n",
            {413},
        ),
        "9 a 100 MB declared body with Expect gets 413, no 100 Continue": lambda t: expect(
            not (
                a := exchange(
                    t,
                    request("POST", COMPLETIONS, headers={"expect": "100-continue"}).replace(
                        b"content-length: 0", b"content-length: 100000000"
                    ),
                )
            ).startswith(b"HTTP/1.1 100")
            and status_of(a) in {413, 417},
            f"{a[:120]!r}",
        ),
    }


def protocol_cases() -> dict[str, Callable[[Target], str | None]]:
    """The cases about the HTTP protocol: heads, methods, timeouts."""
    return {
        "1 a silent connection is closed": closed_within(lambda sock: None, BOUND_S),
        "1 headers at 2 bytes/s are cut": closed_within(
            trickle(b"GET /health HTTP/1.1\r\nhost: g\r\nx-a: " + b"a" * 200, 0.5, 30), BOUND_S
        ),
        "1 a stalled body is cut": closed_within(
            lambda sock: sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 100\r\n\r\n{"),
            BOUND_S,
        ),
        "1 a trickled body is cut": closed_within(
            lambda sock: (
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 100\r\n\r\n"),
                trickle(b"{" * 100, 0.5, 30)(sock),
            ),
            BOUND_S,
        ),
        "1 200 slow heads leave /health answering": connections_flood,
        "2 clients that never read lose their slots": non_readers_lose_their_slots,
        "3 a 64 KB header is a 431": status_case(request("GET", "/v1/models", headers={"x-pad": "a" * 65536}), {431}),
        "3 a 16 MB header is refused, not read": big_head_refused,
        "3 500 headers are a 431": status_case(
            request("GET", "/v1/models", headers={f"x-h{i}": "1" for i in range(500)}), {431}
        ),
        "3 a long X-Request-Id is refused, a short one passed": request_id_echo,
        "3 X-Request-Id with a quote is a 400": status_case(
            request("POST", COMPLETIONS, b'{"model":"m","prompt":"x"}', {"x-request-id": 'a"b'}), {400}
        ),
        "9 a garbage request line is a JSON 400": status_case(b"HELLO\r\n\r\n", {400}),
        "9 an HTTP/0.9 request is refused": lambda t: expect(
            b"alive" not in (a := exchange(t, b"GET /health\r\n\r\n")), f"{a[:120]!r}"
        ),
        "9 HTTP/2 preface is refused": lambda t: expect(
            b"alive" not in (a := exchange(t, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 5)), f"{a[:120]!r}"
        ),
        "9 a bad content-length is a JSON 400": status_case(
            b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: abc\r\n\r\n", {400}
        ),
        "9 content-length with chunked is a JSON 400": status_case(
            b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n"
            b"0\r\n\r\n",
            {400},
        ),
        "9 POST /health is a 405": status_case(request("POST", "/health"), {405}),
        "9 POST /readiness is a 405": status_case(request("POST", "/readiness"), {405}),
        "9 DELETE /v1/completions is a 405": status_case(request("DELETE", COMPLETIONS), {405}),
        "an unknown path is a JSON 404": status_case(request("GET", "/admin"), {404}),
        "10 pipelined streams at the limit get no 429": pipelined_at_the_limit,
    }


def unreachable_engine_case(env: dict[str, str], hole: Callable[[], Any]) -> Callable[[Target], str | None]:
    """5: an engine that never accepts (`hole`): the gateway answers 503 with Retry-After (not a bare 502)."""

    def case(target: Target) -> str | None:
        with hole() as url, run_gateway(url, env) as port:
            other = Target(target.host, port, target.model, target.long_tokens)
            answer = exchange(other, request("POST", COMPLETIONS, other.body()), limit_s=15)
        if status_of(answer) != 503 or b"retry-after" not in answer.lower():
            return f"{answer[:200]!r}"
        return None

    return case


def lookup_flood_case(env: dict[str, str]) -> Callable[[Target], str | None]:
    """12: 12 concurrent GET /v1/models/{id} against an engine that never answers: beyond MAX_CONCURRENT_LOOKUPS a
    429 at once, the rest a 503 after LOOKUP_TIMEOUT_S, /health answering meanwhile."""

    def case(target: Target) -> str | None:
        with scripted_engine(lambda sock: read_all(sock, 60)) as url, run_gateway(url, env) as port:
            other = Target(target.host, port, target.model, target.long_tokens)
            answers: list[bytes] = []
            threads = [
                threading.Thread(target=lambda: answers.append(exchange(other, request("GET", "/v1/models/m"), 15)))
                for _ in range(12)
            ]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            health = exchange(other, request("GET", "/health"), limit_s=5)
            for thread in threads:
                thread.join(30)
        counts = {status: sum(status_of(a) == status for a in answers) for status in (429, 503)}
        if status_of(health) != 200 or counts != {429: 10, 503: 2}:
            return f"/health {status_of(health)}, lookups {[status_of(a) for a in answers]}"
        return expect(all(b"retry-after" in a.lower() and openai_error(a) for a in answers), "no Retry-After")

    return case


def endless_event_case(env: dict[str, str]) -> Callable[[Target], str | None]:
    """13: an engine event that does not end for 64 MiB: the stream ends with a 502 error event, not the event."""

    def endless(sock: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        sock.sendall(head + b"6\r\ndata: \r\n")
        for _ in range(1024):
            sock.sendall(b"10000\r\n" + b"a" * 0x10000 + b"\r\n")
        sock.sendall(b"2\r\n\n\n\r\n0\r\n\r\n")  # the event and the body end: an unbounded gateway forwards it

    def case(target: Target) -> str | None:
        with scripted_engine(endless) as url, run_gateway(url, env) as port:
            other = Target(target.host, port, target.model, target.long_tokens)
            answer = exchange(other, request("POST", COMPLETIONS, other.body(stream=True)), limit_s=30)
        return expect(
            b'"code": 502' in answer[-600:] and len(answer) < 4 << 20, f"{len(answer)} bytes: {answer[-200:]!r}"
        )

    return case


@contextmanager
def scripted_engine(answer: Callable[[socket.socket], object]) -> Iterator[str]:
    """An engine on loopback that reads a request's head and then runs `answer` on the connection (one thread per
    connection): one that never answers, or one that answers badly."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)

    def serve(sock: socket.socket) -> None:
        with sock, suppress(OSError):
            sock.settimeout(60)
            head = b""
            while b"\r\n\r\n" not in head and (data := sock.recv(65536)):
                head += data
            answer(sock)

    def accept() -> None:
        with suppress(OSError):
            while True:
                threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()


@contextmanager
def black_hole() -> Iterator[str]:
    """A listening socket that never accepts, its queue full: connecting to it times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(listener.getsockname())
        fillers.append(filler)
    time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for sock in [*fillers, listener]:
            sock.close()


@contextmanager
def socket_black_hole() -> Iterator[str]:
    """A Unix socket that never accepts, its queue full: a connect to it fails at once (EAGAIN), as a pod's gateway
    would find a vLLM too busy to accept."""
    with tempfile.TemporaryDirectory(prefix="hole-") as folder:
        path = f"{folder}/engine.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(0)
        fillers = []
        for _ in range(4):
            filler = socket.socket(socket.AF_UNIX)
            filler.setblocking(False)
            with suppress(BlockingIOError):
                filler.connect(path)
            fillers.append(filler)
        try:
            yield f"unix:{path}"
        finally:
            for sock in [*fillers, listener]:
                sock.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def run_gateway(upstream: str, env: dict[str, str]) -> Iterator[int]:
    """`python -m llm_gateway` in front of `upstream` on a free loopback port; its port once /health answers."""
    port = free_port()
    full_env = {**os.environ, **env, "HOST": "127.0.0.1", "PORT": str(port), "UPSTREAM_URL": upstream, "AUTH": "off"}
    quiet = subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "llm_gateway"], cwd=ROOT, env=full_env, stdout=quiet, stderr=quiet
    )
    try:
        deadline = time.monotonic() + 60
        while status_of(_try(port)) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the gateway did not start (exit {process.poll()})")
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def _try(port: int) -> bytes:
    try:
        return exchange(Target("127.0.0.1", port, ""), request("GET", "/health"), limit_s=2)
    except OSError:
        return b""


@contextmanager
def run_standin() -> Iterator[str]:
    """The stand-in engine at full speed, as a process of its own, on a Unix socket (its unix: URL) as vLLM is on a
    pod (and on a loopback port, which this does not use)."""
    with tempfile.TemporaryDirectory(prefix="standin-") as folder:
        path = f"{folder}/engine.sock"
        command = [sys.executable, "-m", "llm_bench.standin_engine", f"--port={free_port()}", f"--uds={path}"]
        process = subprocess.Popen([*command, "--ttft-ms", "0", "--gap-ms", "0"], cwd=ROOT)
        try:
            time.sleep(1.0)
            yield f"unix:{path}"
        finally:
            process.terminate()
            process.wait(10)


class _UnixConnection(http.client.HTTPConnection):
    """http.client over a Unix socket: the engine's on a pod."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def longest_answer(upstream: str, model: str) -> int:
    """The most tokens a stream of `model` may ask of the engine at `upstream`: its `max_model_len` (vLLM's
    /v1/models) less room for the prompt; a larger max_tokens is a 400, which would end a "long" stream at once."""
    path = socket_path(upstream)
    if path is not None:
        connection = _UnixConnection(path, timeout=10)
        connection.request("GET", "/v1/models")
        served = {entry["id"]: entry for entry in json.load(connection.getresponse())["data"]}
        connection.close()
    else:
        with urllib.request.urlopen(f"{upstream}/v1/models", timeout=10) as response:  # noqa: S310 - loopback only
            served = {entry["id"]: entry for entry in json.load(response)["data"]}
    if model not in served or not isinstance(served[model].get("max_model_len"), int):
        raise SystemExit(f"error: {upstream} does not serve {model!r} with a max_model_len; give --long-tokens")
    return served[model]["max_model_len"] - 64


def main(argv: list[str] | None = None) -> int:
    """Run every case once; print a row per case and the counts; 1 if any failed."""
    parser = argparse.ArgumentParser(prog="python -m tools.attack_gateway", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--upstream", help="an engine already running on loopback or a Unix socket (unix:/path; default: the stand-in)"
    )
    parser.add_argument("--model", default="standin", help="the model the engine serves")
    parser.add_argument(
        "--long-tokens",
        type=int,
        help="max_tokens of a long stream (default: the engine's max_model_len less room for the prompt; the "
        "stand-in's 2,000,000)",
    )
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = parser.parse_args(argv)
    if (
        args.upstream
        and socket_path(args.upstream) is None
        and urlsplit(args.upstream).hostname not in ("127.0.0.1", "localhost")
    ):
        parser.error("--upstream must be on loopback or a Unix socket (unix:/path)")
    with ExitStack() as stack:
        upstream = args.upstream or stack.enter_context(run_standin())
        port = stack.enter_context(run_gateway(upstream, GATEWAY_ENV))
        long_tokens = args.long_tokens or (longest_answer(upstream, args.model) if args.upstream else 2_000_000)
        target = Target("127.0.0.1", port, args.model, long_tokens)
        cases = {**protocol_cases(), **body_cases(target)}
        cases["5 an unreachable engine is a 503 with Retry-After"] = unreachable_engine_case(GATEWAY_ENV, black_hole)
        cases["5 an engine whose socket is full is a 503 with Retry-After"] = unreachable_engine_case(
            GATEWAY_ENV, socket_black_hole
        )
        cases["11 a steady slow reader loses its slots"] = slow_reader_case(upstream, GATEWAY_ENV)
        cases["12 lookups against a stuck engine are bounded"] = lookup_flood_case(GATEWAY_ENV)
        cases["13 an engine event that never ends is a 502 event"] = endless_event_case(GATEWAY_ENV)
        results = {}
        for name, case in cases.items():
            if args.only not in name:
                continue
            started = time.monotonic()
            try:
                problem = case(target)
            except Exception as exc:  # a case that crashes is a failed case, and the run goes on
                problem = f"{type(exc).__name__}: {exc}"
            results[name] = problem
            verdict = "pass" if problem is None else f"FAIL {problem}"
            print(f"{name:<64} {time.monotonic() - started:5.1f}s  {verdict}", flush=True)
    failed = sum(problem is not None for problem in results.values())
    print(f"\n{len(results)} cases, {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
