"""An engine that answers as a test scripts it, for the gateway's bounds on what the engine sends: a raw HTTP/1.1
server on a free loopback port, one thread per connection, each request's answer written by the test's `Script`
straight to the socket (an event that never ends, a body larger than any bound, no answer at all)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

Script = Callable[[str, str, socket.socket], None]
"""Writes the answer to a request (method, path) on its connection; returns to read the next request."""

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    """`data` as one HTTP chunk."""
    return b"%x\r\n%b\r\n" % (len(data), data)


@dataclass
class ScriptedEngine:
    """The server's address and what it saw: connections accepted, requests read (method, path)."""

    url: str
    connections: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)


def _read_request(sock: socket.socket, buffer: bytearray) -> tuple[str, str] | None:
    """Method and path of the next request on `sock` (its body read and dropped), or None at the connection's end."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            return None
        rest += data
    buffer[:] = rest[length:]
    return method, path


@contextmanager
def run_scripted_engine(script: Script) -> Iterator[ScriptedEngine]:
    """The engine on a free loopback port until the block ends; a script that raises OSError (the gateway closed
    the connection) just ends its connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    engine = ScriptedEngine(f"http://127.0.0.1:{listener.getsockname()[1]}")
    open_sockets: list[socket.socket] = []
    stopping = threading.Event()

    def serve(sock: socket.socket) -> None:
        buffer = bytearray()
        with sock, suppress(OSError):
            while (request := _read_request(sock, buffer)) is not None:
                engine.requests.append(request)
                script(*request, sock)

    def accept() -> None:
        while not stopping.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            engine.connections += 1
            open_sockets.append(sock)
            threading.Thread(target=serve, args=(sock,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield engine
    finally:
        stopping.set()
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not, on Linux)
        listener.close()
        for sock in open_sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        acceptor.join(timeout=5)
