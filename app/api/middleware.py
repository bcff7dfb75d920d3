"""ASGI middleware: a body size limit for the API, and one JSON log line per request."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.probe_paths import HEALTH_PATH, READINESS_PATH

log = logging.getLogger("app.requests")


def _log_level(path: str) -> int:
    """API calls and page loads at INFO; probes (every few seconds) and the UI's own assets/polling at DEBUG."""
    if path in (HEALTH_PATH, READINESS_PATH):
        return logging.DEBUG
    return logging.INFO if path == "/" or path.startswith("/v1/") else logging.DEBUG


class BodyLimitMiddleware:
    """Answer 413 to API requests whose body is larger than `max_bytes`, before anything parses it."""

    def __init__(self, app: ASGIApp, max_bytes: int, path_prefix: str = "/v1"):
        self.app = app
        self.max_bytes = max_bytes
        self.path_prefix = path_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.path_prefix):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(send)
            return
        # Read the (possibly chunked) body with a cap, then replay it to the app.
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Send) -> None:
        payload = json.dumps({"error": f"request body larger than {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})


class RequestLogMiddleware:
    """Log each HTTP request as one JSON line: method, path, status, latency, backend, batch size."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app raises before responding, uvicorn answers 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            state: dict[str, Any] = scope.get("state", {})
            fields = {
                "event": "request",
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "latency_ms": round((time.perf_counter() - started) * 1000.0, 1),
                "backend": state.get("backend"),
                "batch_size": state.get("batch_size"),
            }
            log.log(_log_level(scope["path"]), "request", extra=fields)
