"""What the shared server (common/http/protocol.py) refuses in a request's framing, read from a raw socket: a chunked
body's trailer section past the head's bounds (a 431 long before the body timeout, the fields never merged into the
request's headers), a request without Host or with two (RFC 9112 section 3.2), and a request to switch protocols
(a WebSocket handshake, h2c, CONNECT). Each refusal is a JSON 400 or 431 and the connection is closed; the
requests beside them (HTTP/1.0 without Host, a probe's Host, a long chunked body) are served."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import pytest
import uvicorn

from common.http.protocol import server_config
from common.settings import ServiceSettings

BODY_TIMEOUT_S = 30.0  # long, so that an answer well before it is the bound's, not the body clock's
SETTINGS = ServiceSettings(max_header_bytes=4096, max_header_count=20, body_timeout_s=BODY_TIMEOUT_S)
CHUNKED_HEAD = b"POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"


async def echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, then answers with the request's header names as they are once the body is in (the
    trailer fields, which arrive after the body, would have been appended to them by then) and the body's size."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    names = [name.decode() for name, _ in scope["headers"]]
    body = json.dumps({"headers": names, "body_bytes": size}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(server_config(echo_app, SETTINGS, lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.01)
    yield sock.getsockname()
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    received = b""
    with suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def exchange(address: tuple[str, int], *sends: bytes) -> tuple[bytes, float]:
    """Send each of `sends` in turn on a fresh connection (a refusal may cut the sending short), then read until the
    server closes; the answer and the seconds from the first send until the close."""
    with socket.create_connection(address, timeout=BODY_TIMEOUT_S + 10) as sock:
        started = time.monotonic()
        with suppress(BrokenPipeError, ConnectionResetError):
            for data in sends:
                sock.sendall(data)
        return read_until_closed(sock), time.monotonic() - started


def status_and_error(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), answer[:200]
    return int(head.split()[1]), json.loads(body)["error"]


def served(answer: bytes) -> dict[str, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer[:200]
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return json.loads(body)


def test_a_trailer_field_that_never_ends_gets_a_431_long_before_the_body_timeout(server):
    # The field is sent in pieces, as an attacker keeps one growing until the body timeout.
    pieces = [CHUNKED_HEAD + b"5\r\nhello\r\n0\r\nx-trail: "] + [b"a" * 1024] * 64
    answer, elapsed = exchange(server, *pieces)
    assert status_and_error(answer) == (431, "request trailers larger than 4096 bytes")
    assert elapsed < BODY_TIMEOUT_S / 3


def test_a_trailer_field_that_never_ends_sent_with_the_last_chunk_gets_a_431(server):
    answer, elapsed = exchange(server, CHUNKED_HEAD + b"5\r\nhello\r\n0\r\nx-trail: " + b"a" * 8192)
    assert status_and_error(answer) == (431, "request trailers larger than 4096 bytes")
    assert elapsed < BODY_TIMEOUT_S / 3


def test_a_trailer_section_over_max_header_bytes_gets_a_431(server):
    fields = b"".join(b"x-trail-%d: %s\r\n" % (i, b"a" * 1000) for i in range(8))
    answer, _ = exchange(server, CHUNKED_HEAD + b"0\r\n" + fields + b"\r\n")
    assert status_and_error(answer) == (431, "request trailers larger than 4096 bytes")


def test_more_trailer_fields_than_max_header_count_get_a_431(server):
    fields = b"".join(b"t%d: 1\r\n" % i for i in range(21))
    answer, _ = exchange(server, CHUNKED_HEAD + b"0\r\n" + fields + b"\r\n")
    assert status_and_error(answer) == (431, "more than 20 request trailer fields")


def test_trailer_fields_within_the_bounds_are_dropped_not_merged_into_the_headers(server):
    trailers = b"authorization: Bearer someone-else\r\nx-checksum: abc\r\n"
    answer, _ = exchange(
        server,
        CHUNKED_HEAD.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1),
        b"5\r\nhello\r\n0\r\n" + trailers + b"\r\n",
    )
    echoed = served(answer)
    assert echoed["body_bytes"] == 5
    assert echoed["headers"] == ["host", "transfer-encoding", "connection"]


def test_a_long_chunked_body_whose_reads_end_at_chunk_size_lines_is_served(server):
    """A read that ends just after a chunk's size line, before its data, looks like the last chunk's until the data
    comes: it must not count as a trailer section."""
    data = b"d" * 60_000
    with socket.create_connection(server, timeout=30) as sock:
        sock.sendall(CHUNKED_HEAD.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1) + b"ea60\r\n")
        for _ in range(10):
            time.sleep(0.05)  # so that each read the server makes ends at a size line
            sock.sendall(data + b"\r\nea60\r\n")
        sock.sendall(data + b"\r\n0\r\n\r\n")
        answer = read_until_closed(sock)
    assert served(answer)["body_bytes"] == 11 * len(data)


@pytest.mark.parametrize(
    ("head", "error"),
    [
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", "an HTTP/1.1 request needs a Host header field", id="none"),
        pytest.param(b"GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", "more than one Host header field", id="two"),
        pytest.param(b"GET / HTTP/1.0\r\nhost: a\r\nhost: a\r\n\r\n", "more than one Host header field", id="two-1.0"),
        pytest.param(
            b"GET / HTTP/1.1\r\nhost: a b/c\r\n\r\n",
            "the Host header field is not a host name or address with an optional port",
            id="invalid",
        ),
    ],
)
def test_a_request_without_one_valid_host_gets_a_400(server, head: bytes, error: str):
    answer, _ = exchange(server, head)
    assert status_and_error(answer) == (400, error)


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"GET / HTTP/1.0\r\n\r\n", id="http-1.0-without-host"),
        pytest.param(b"GET / HTTP/1.1\r\nhost: 10.1.2.3:8080\r\nconnection: close\r\n\r\n", id="probe-ipv4"),
        pytest.param(b"GET / HTTP/1.1\r\nhost: [fd00::7]:8080\r\nconnection: close\r\n\r\n", id="probe-ipv6"),
        pytest.param(b"GET / HTTP/1.1\r\nhost: api.example.com\r\nconnection: close\r\n\r\n", id="name"),
        pytest.param(b"GET / HTTP/1.1\r\nhost:\r\nconnection: close\r\n\r\n", id="empty"),
    ],
)
def test_a_request_with_one_valid_host_or_http_1_0_without_one_is_served(server, head: bytes):
    answer, _ = exchange(server, head)
    served(answer)


@pytest.mark.parametrize(
    ("head", "asked"),
    [
        pytest.param(
            b"GET /chat HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
            b"sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
            "an upgrade to websocket",
            id="websocket",
        ),
        pytest.param(
            b"POST /echo HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\n"
            b"http2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\ncontent-length: 5\r\n\r\nhello",
            "an upgrade to h2c",
            id="h2c",
        ),
        pytest.param(b"CONNECT x:443 HTTP/1.1\r\nhost: x:443\r\n\r\n", "CONNECT", id="connect"),
    ],
)
def test_a_request_to_switch_protocols_gets_a_json_400_and_the_connection_closed(server, head: bytes, asked: str):
    answer, _ = exchange(server, head)
    assert status_and_error(answer) == (400, f"{asked} is not served here: this server speaks plain HTTP/1.1 only")
