"""A threaded HTTP server on a free loopback port, started and stopped as a context manager: the base of the
suite's stand-ins for services nobody runs here (the Hub, the Kubernetes API, a slow engine, a service)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (the default prints every request to stderr)."""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class FakeServer:
    """Serves `handler` on 127.0.0.1 at a free port from a background thread, between `with` and its end."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name=type(self).__name__)

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
