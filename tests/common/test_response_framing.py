"""A streamed response through the shared server (common/http/), read byte for byte from a raw socket: its chunks
are framed as HTTP/1.1 requires, an empty chunk does not end the message, the connection stays usable for the next
request, a HEAD answer carries no body, and a content-length body is sent as declared. Each holds for pieces sent
through `send` and for pieces written through the server's BODY_NOWAIT extension (the `-nowait` paths), which
must write what `send` would, or decline."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from common.http.protocol import BODY_NOWAIT, server_config
from common.settings import ServiceSettings

PIECES = [b"data: one\n\n", b"", b"data: " + b"x" * 70_000 + b"\n\n", b"data: [DONE]\n\n"]


async def streaming_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Streams PIECES (chunked) on /stream; on /fixed, the same pieces under a content-length; on /explicit, chunked
    with the app's own transfer-encoding header. With `-nowait`, each piece but the last is offered to the server's
    BODY_NOWAIT write first, and sent through `send` only when it declines."""
    if scope["type"] != "http":
        return
    path, _, nowait = scope["path"].partition("-")
    write_nowait = scope["extensions"][BODY_NOWAIT] if nowait == "nowait" else None
    headers = [(b"content-type", b"text/event-stream")]
    if path == "/fixed":
        headers.append((b"content-length", str(sum(map(len, PIECES))).encode()))
    if path == "/explicit":
        headers.append((b"transfer-encoding", b"chunked"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for piece in PIECES[:-1]:
        if write_nowait is None or not write_nowait(piece):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": PIECES[-1], "more_body": False})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    settings = ServiceSettings()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(server_config(streaming_app, settings, lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.01)
    yield sock.getsockname()
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


@contextmanager
def connection(address: tuple[str, int]) -> Iterator[socket.socket]:
    with socket.create_connection(address, timeout=10) as sock:
        yield sock


def read_response(sock: socket.socket, *, head_only: bool = False) -> tuple[bytes, bytes]:
    """One response's head and raw body (chunk framing kept), read up to the end of its framing."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    if head_only:
        return head, rest
    fields = {
        line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")[1:]
    }
    if b"content-length" in fields:
        length = int(fields[b"content-length"])
        while len(rest) < length:
            rest += sock.recv(65536)
        return head, rest
    while not rest.endswith(b"0\r\n\r\n"):
        rest += sock.recv(65536)
    return head, rest


@pytest.mark.parametrize("path", ["/stream", "/stream-nowait", "/explicit-nowait"])
def test_a_stream_is_framed_chunk_by_chunk_and_the_connection_serves_the_next_request(server, path: str):
    with connection(server) as sock:
        for _ in range(2):  # the second request proves the connection's state is intact after the first
            sock.sendall(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path.encode())
            head, body = read_response(sock)
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"transfer-encoding: chunked" in head.lower()
            # RFC 9112 7.1: size in hex, CRLF, data, CRLF; no chunk for the empty piece; a zero-size chunk ends it.
            expected = (
                b"b\r\ndata: one\n\n\r\n" + b"11178\r\n" + PIECES[2] + b"\r\n" + b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
            )
            assert body == expected


@pytest.mark.parametrize("path", ["/stream", "/stream-nowait", "/explicit-nowait"])
def test_a_head_request_gets_the_head_and_no_body(server, path: str):
    with connection(server) as sock:
        sock.sendall(b"HEAD %s HTTP/1.1\r\nhost: x\r\n\r\n" % path.encode())
        head, rest = read_response(sock, head_only=True)
        assert head.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /fixed HTTP/1.1\r\nhost: x\r\n\r\n")  # nothing of the HEAD answer's body sits before it
        time.sleep(0.2)
        rest += sock.recv(65536)
        assert rest.startswith(b"HTTP/1.1 200 "), rest[:80]


@pytest.mark.parametrize("path", ["/fixed", "/fixed-nowait"])
def test_a_content_length_body_is_sent_as_declared(server, path: str):
    with connection(server) as sock:
        sock.sendall(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path.encode())
        head, body = read_response(sock)
        assert b"transfer-encoding" not in head.lower()
        assert body == b"".join(PIECES)
