"""The gateway bounded under attack (issue 25, findings 1-5 and 7-10): each through the real server on a raw
socket, in front of the full-speed stand-in engine, with bounds tight enough that each case ends in seconds."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.llm.stack import GatewayProcess, run_gateway, run_standin
from tools.attack_gateway import read_all

BOUND_S = 1.0
SLACK_S = 3.0  # what a bound may overrun by on two shared cores
CLOSE_LIMIT_S = 15.0  # how long a test waits for the server to close a connection
LIMIT = 4
BOUNDS = {
    "HEADER_TIMEOUT_S": str(BOUND_S),
    "BODY_TIMEOUT_S": str(BOUND_S),
    "WRITE_TIMEOUT_S": str(BOUND_S),
    "MAX_CONCURRENT_REQUESTS": str(LIMIT),
    "UPSTREAM_CONNECT_TIMEOUT_S": "0.5",
}
COMPLETIONS = "/v1/completions"


def completion(**fields: object) -> bytes:
    """A completion request's body for the stand-in engine: a short prompt and 4 tokens, plus `fields`."""
    return json.dumps({"model": "standin", "prompt": "hi there", "max_tokens": 4, **fields}).encode()


def request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, close: bool = True
) -> bytes:
    """A whole HTTP/1.1 request."""
    lines = [f"{method} {path} HTTP/1.1", "host: gateway", *(["connection: close"] if close else [])]
    if method == "POST":
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def connect(gateway: GatewayProcess, rcvbuf: int | None = None) -> socket.socket:
    """A fresh connection to the gateway (with a small receive buffer, for a client that does not read)."""
    parts = urlsplit(gateway.url)
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((parts.hostname, parts.port))
    return sock


def exchange(gateway: GatewayProcess, raw: bytes) -> bytes:
    """Send `raw` on a fresh connection; the answer until the server closes."""
    with connect(gateway) as sock:
        sock.sendall(raw)
        return read_all(sock, CLOSE_LIMIT_S)[0]


def statuses(answer: bytes) -> list[int]:
    """The final statuses of the answers on one connection, in order (100 Continue left out)."""
    lines = [line for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
    return [int(line.split()[1]) for line in lines if not line.startswith(b"HTTP/1.1 100")]


def openai_error(answer: bytes) -> dict[str, object]:
    """The `error` object of an answer in the gateway's (OpenAI's) error shape."""
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert {"message", "type", "param", "code"} <= error.keys(), answer
    return error


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    with run_standin() as (url, _engine):
        yield url


@pytest.fixture(scope="module")
def gateway(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with tight bounds in front of the full-speed stand-in."""
    with run_gateway(engine_url, tmp_path_factory.mktemp("bounded"), BOUNDS) as process:
        yield process


# 1: silent, slow and stalled clients are closed in bounded time.
@pytest.mark.parametrize(
    "sent",
    [
        pytest.param(b"", id="silent"),
        pytest.param(b"POST /v1/completions HTTP/1.1\r\nhost: g\r\nx-a: aaa", id="unfinished-head"),
        pytest.param(b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 100\r\n\r\n{", id="stalled-body"),
    ],
)
def test_a_client_that_stops_sending_is_closed_in_bounded_time(gateway: GatewayProcess, sent: bytes):
    with connect(gateway) as sock:
        sock.sendall(sent)
        answer, elapsed = read_all(sock, CLOSE_LIMIT_S)
    assert elapsed < BOUND_S + SLACK_S, f"open for {elapsed:.1f} s"
    if b"content-length: 100" in sent:
        assert statuses(answer) == [408]
        assert openai_error(answer)["code"] == 408


def test_headers_trickled_a_byte_at_a_time_are_cut(gateway: GatewayProcess):
    with connect(gateway) as sock:
        started = time.monotonic()
        with suppress(OSError):
            for byte in b"GET /v1/models HTTP/1.1\r\nhost: g\r\nx-slow: " + b"a" * 100:
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
        read_all(sock, CLOSE_LIMIT_S)
    assert time.monotonic() - started < BOUND_S + SLACK_S


# 2: a client that never reads loses its slot once its answer has waited WRITE_TIMEOUT_S for it.
def test_clients_that_never_read_lose_their_slots(gateway: GatewayProcess):
    hogs = [connect(gateway, rcvbuf=4096) for _ in range(LIMIT)]
    try:
        for hog in hogs:
            hog.sendall(request("POST", COMPLETIONS, completion(max_tokens=2_000_000, stream=True)))
        started = time.monotonic()
        while statuses(exchange(gateway, request("POST", COMPLETIONS, completion()))) != [200]:
            assert time.monotonic() - started < 20, "the slots of clients that do not read were never freed"
            time.sleep(0.5)
    finally:
        for hog in hogs:
            hog.close()


def test_a_slow_reader_that_keeps_reading_is_not_cut(gateway: GatewayProcess):
    # 64 KB a second: the gateway's writes pause and resume all along, never for WRITE_TIMEOUT_S at a stretch.
    with connect(gateway, rcvbuf=16384) as sock:
        sock.sendall(request("POST", COMPLETIONS, completion(max_tokens=2_000_000, stream=True)))
        received, started = 0, time.monotonic()
        while time.monotonic() - started < 3 * BOUND_S + 1:
            chunk = sock.recv(16384)
            assert chunk, f"cut after {received} bytes, {time.monotonic() - started:.1f} s"
            received += len(chunk)
            time.sleep(0.25)
    assert received > 0


def test_a_slow_reader_gets_every_event_once_and_in_order(gateway: GatewayProcess):
    # The stream is written from the upstream's read callback while the client's socket takes bytes, and through
    # `send` (waiting) while it does not: a reader that stalls now and then moves it between the two many times.
    tokens = 20_000  # about 3 MB: more than the socket buffers hold while the reader stalls
    body = completion(max_tokens=tokens, stream=True, stream_options={"include_usage": True})
    with connect(gateway, rcvbuf=8192) as sock:
        sock.sendall(request("POST", COMPLETIONS, body))
        raw, stalled_at = bytearray(), 0
        while chunk := sock.recv(65536):
            raw += chunk
            if len(raw) - stalled_at > 256 * 1024:
                stalled_at = len(raw)
                time.sleep(0.1)
    head, _, chunked_body = bytes(raw).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    events = [event for event in dechunk(chunked_body).split(b"\n\n") if event]
    payloads = [json.loads(event.removeprefix(b"data: ")) for event in events[:-1]]
    assert events[-1] == b"data: [DONE]"
    texts = [payload["choices"][0]["text"] for payload in payloads if payload["choices"]]
    assert len(texts) == tokens and set(texts) == {" tok"}
    assert payloads[-1]["usage"]["completion_tokens"] == tokens


def dechunk(body: bytes) -> bytes:
    """A chunked body decoded, strictly: every size line, every CRLF and the last chunk where they belong."""
    out, position = bytearray(), 0
    while True:
        line_end = body.index(b"\r\n", position)
        size = int(body[position:line_end], 16)
        start = line_end + 2
        if size == 0:
            assert body[start:] == b"\r\n", "bytes after the last chunk"
            return bytes(out)
        out += body[start : start + size]
        assert body[start + size : start + size + 2] == b"\r\n", "a chunk not followed by CRLF"
        position = start + size + 2


# 3: the head is bounded in size and in fields; X-Request-Id is checked before it becomes the answer's id.
def test_too_many_header_fields_get_a_431_in_the_gateways_shape(gateway: GatewayProcess):
    answer = exchange(gateway, request("GET", "/v1/models", headers={f"x-h{i}": "1" for i in range(101)}))
    assert statuses(answer) == [431]
    assert openai_error(answer)["message"] == "more than 100 request header fields"


def test_a_head_too_large_gets_a_431_in_the_gateways_shape(gateway: GatewayProcess):
    answer = exchange(gateway, request("GET", "/v1/models", headers={"x-pad": "a" * 20000}))
    assert statuses(answer) == [431]
    assert openai_error(answer)["type"] == "invalid_request_error"


@pytest.mark.parametrize("request_id", ["a" * 8000, 'quote"d', "with space"])
def test_an_unfit_request_id_is_refused_not_echoed(gateway: GatewayProcess, request_id: str):
    answer = exchange(gateway, request("POST", COMPLETIONS, completion(), {"x-request-id": request_id}))
    assert statuses(answer) == [400]
    assert request_id.encode() not in answer
    assert "X-Request-Id" in openai_error(answer)["message"]


def test_a_fit_request_id_is_passed_on(gateway: GatewayProcess):
    answer = exchange(gateway, request("POST", COMPLETIONS, completion(), {"x-request-id": "trace-0af7651916cd43dd"}))
    assert statuses(answer) == [200]


# 4: admission counts sequences.
@pytest.mark.parametrize(
    "fields",
    [{"n": LIMIT + 1}, {"best_of": LIMIT + 1}, {"prompt": ["hi"] * (LIMIT + 1)}, {"prompt": [[1, 2]] * (LIMIT + 1)}],
    ids=["n", "best_of", "prompts", "token-prompts"],
)
def test_a_request_for_more_sequences_than_the_bound_is_a_400(gateway: GatewayProcess, fields: dict[str, object]):
    answer = exchange(gateway, request("POST", COMPLETIONS, completion(**fields)))
    assert statuses(answer) == [400]
    assert f"asks for {LIMIT + 1} sequences" in openai_error(answer)["message"]


def test_sequences_beyond_the_bound_get_a_429_while_one_more_fits(engine_url: str, tmp_path: Path):
    # The streams below are not read: the default write timeout (30 s) keeps them open for the test.
    patient = {name: value for name, value in BOUNDS.items() if name != "WRITE_TIMEOUT_S"}
    with run_gateway(engine_url, tmp_path, patient) as gateway:
        streams = [connect(gateway) for _ in range(LIMIT - 1)]
        try:
            for stream in streams:
                stream.sendall(request("POST", COMPLETIONS, completion(max_tokens=2_000_000, stream=True)))
                assert stream.recv(12) == b"HTTP/1.1 200"
            two = exchange(gateway, request("POST", COMPLETIONS, completion(n=2)))
            one = exchange(gateway, request("POST", COMPLETIONS, completion(n=1)))
        finally:
            for stream in streams:
                stream.close()
    assert statuses(two) == [429]
    assert b"retry-after: 1" in two.lower()
    assert statuses(one) == [200]


@pytest.mark.parametrize("fields", [{"n": "many"}, {"n": 0}, {"best_of": True}], ids=["text", "zero", "bool"])
def test_a_sequence_count_that_is_not_a_positive_integer_is_a_400(gateway: GatewayProcess, fields: dict[str, object]):
    answer = exchange(gateway, request("POST", COMPLETIONS, completion(**fields)))
    assert statuses(answer) == [400]
    assert openai_error(answer)["param"] == next(iter(fields))


# 7: `stream` is a JSON boolean or nothing.
@pytest.mark.parametrize("stream", ["true", "yes", 1, {}], ids=["true-text", "yes", "one", "object"])
def test_stream_that_is_not_a_boolean_is_a_400(gateway: GatewayProcess, stream: object):
    answer = exchange(gateway, request("POST", COMPLETIONS, completion(stream=stream)))
    assert statuses(answer) == [400]
    error = openai_error(answer)
    assert error["param"] == "stream"
    assert error["type"] == "invalid_request_error"


# 8: deeply nested JSON is the client's mistake.
def test_json_nested_too_deeply_is_a_400(gateway: GatewayProcess):
    body = b'{"model": "standin", "prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    answer = exchange(gateway, request("POST", COMPLETIONS, body))
    assert statuses(answer) == [400]
    assert "nested too deeply" in openai_error(answer)["message"]


# 9: protocol errors in the gateway's shape; an announced huge body is refused before it is invited.
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"HELLO\r\n\r\n", id="garbage"),
        pytest.param(b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-length: abc\r\n\r\n", id="bad-length"),
    ],
)
def test_a_malformed_request_gets_a_400_in_the_gateways_shape(gateway: GatewayProcess, raw: bytes):
    answer = exchange(gateway, raw)
    assert statuses(answer) == [400]
    assert openai_error(answer)["type"] == "invalid_request_error"


def test_an_http_0_9_request_is_not_answered(gateway: GatewayProcess):
    answer = exchange(gateway, b"GET /health\r\n\r\n")
    assert b"alive" not in answer
    assert statuses(answer) in ([], [400])


def test_a_100_mb_body_announced_with_expect_is_refused_without_an_invitation(gateway: GatewayProcess):
    head = request("POST", COMPLETIONS, headers={"expect": "100-continue"}).replace(
        b"content-length: 0", b"content-length: 100000000"
    )
    answer = exchange(gateway, head)
    assert b"100 Continue" not in answer
    assert statuses(answer) == [413]


@pytest.mark.parametrize("path", ["/health", "/readiness"])
def test_a_probe_answers_only_get(gateway: GatewayProcess, path: str):
    answer = exchange(gateway, request("POST", path))
    assert statuses(answer) == [405]
    assert b"allow: GET" in answer


# 10: a client that keeps exactly the bound busy is never refused.
def test_streams_pipelined_at_the_bound_get_no_429(engine_url: str, tmp_path: Path):
    with run_gateway(engine_url, tmp_path, {"MAX_CONCURRENT_REQUESTS": "1"}) as gateway:
        one = request("POST", COMPLETIONS, completion(stream=True), close=False)
        with connect(gateway) as sock:
            sock.sendall(one * 5 + request("GET", "/health"))
            answer, _ = read_all(sock, CLOSE_LIMIT_S)
    assert statuses(answer) == [200] * 6


# 5: an engine that takes no connection: a 503 with Retry-After, the cause logged, the connect tried twice.
def test_an_engine_that_accepts_no_connection_gives_a_503_with_retry_after(tmp_path: Path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = [socket.socket() for _ in range(4)]  # fill its accept queue: further connects time out
    for filler in fillers:
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(listener.getsockname())
    try:
        upstream = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with run_gateway(upstream, tmp_path, BOUNDS) as gateway:
            answer = exchange(gateway, request("POST", COMPLETIONS, completion()))
            log = gateway.tail()
    finally:
        for sock in [*fillers, listener]:
            sock.close()
    assert statuses(answer) == [503]
    assert b"retry-after: 1" in answer.lower()
    assert "ConnectionTimeoutError" in openai_error(answer)["message"]  # aiohttp's name for it
    assert log.count('"cause": "ConnectionTimeoutError"') == 2, log
    assert "engine connect failed; trying once more" in log
