"""ASGI middleware: a body size limit for every route, and one JSON log line per request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.disconnect import CLIENT_CLOSED_REQUEST
from app.http_protocol import CUT_STATUS_STATE_KEY
from app.probe_paths import HEALTH_PATH, READINESS_PATH

log = logging.getLogger("app.requests")


def _log_level(path: str) -> int:
    """API calls and page loads at INFO; probes (every few seconds) and the UI's own assets/polling at DEBUG."""
    if path in (HEALTH_PATH, READINESS_PATH):
        return logging.DEBUG
    return logging.INFO if path == "/" or path.startswith("/v1/") else logging.DEBUG


async def _discard_body(receive: Receive, already: int, max_discard_bytes: int, timeout_s: float) -> None:
    """Read and drop the rest of a refused body, up to `max_discard_bytes` and `timeout_s`.

    A client that writes its whole body before reading (Python's urllib, a load balancer) sees a
    connection reset instead of our answer if we answer and close while it is still writing; reading
    the body first lets it read the 413. The bounds keep a huge or slow body from costing more.
    """

    async def drain() -> None:
        seen = already
        while seen <= max_discard_bytes:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(drain(), timeout_s)


async def send_json_error(
    send: Send, status: int, message: str, *, extra_headers: list[tuple[bytes, bytes]] | None = None, close: bool = True
) -> None:
    """Answer `{"error": message}` straight from ASGI middleware (before any route runs)."""
    payload = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """Answer 413 to any request (API, UI, Gradio's own routes) whose body is larger than `max_bytes`.

    The body is read with a cap before anything parses it and replayed to the app; a refused body is
    read and discarded (bounded) before the 413 so that clients that write it all first can read it.
    Gradio's upload route is refused outright (403): the UI takes no files, and uploads would be kept
    on the pod's disk.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        max_discard_bytes: int,
        discard_timeout_s: float = 10.0,
        refused_paths: tuple[str, ...] = (),
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.max_discard_bytes = max_discard_bytes
        self.discard_timeout_s = discard_timeout_s
        self.refused_paths = refused_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        # A client that sent `Expect: 100-continue` waits for an invitation before it sends the body;
        # the first `receive()` would send uvicorn's 100 Continue, so a refusal must come before it.
        waiting = headers.get(b"expect", b"").lower() == b"100-continue"
        if scope["path"].rstrip("/") in self.refused_paths:
            if not waiting:
                await _discard_body(receive, 0, self.max_discard_bytes, self.discard_timeout_s)
            await send_json_error(send, 403, "this service accepts no file uploads")
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(receive, send, -1 if waiting else 0)
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
                await self._reject(receive, send, len(body) if more else -1)
                return
        whole = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, replaying(whole, receive), send)

    async def _reject(self, receive: Receive, send: Send, already: int) -> None:
        """413 after discarding the rest of the body (`already` bytes read; -1: nothing to read, because
        it was all read or because the client waits for a 100 Continue it will not get)."""
        if already >= 0:
            await _discard_body(receive, already, self.max_discard_bytes, self.discard_timeout_s)
        await send_json_error(send, 413, f"request body larger than {self.max_bytes} bytes")


def replaying(first: Message, receive: Receive) -> Receive:
    """A `receive` that gives `first` (a body already read) once, then whatever `receive` gives."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return first
        return await receive()

    return replay


class RequestLogMiddleware:
    """Log each HTTP request as one JSON line: method, path, status, latency, backend, batch size."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None
        logged = False

        def write_line() -> None:
            nonlocal logged
            logged = True
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

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False) and not logged:
                write_line()  # before the last byte leaves: whoever reads the answer finds the line written
            await send(message)

        failed = True
        try:
            await self.app(scope, receive, capture)
            failed = False
        finally:
            if not logged:
                if status is None:
                    # No answer: the protocol cut the request (its status), the client left (499, e.g. an
                    # aborted upload), or the app raised (uvicorn answers 500).
                    cut = scope.get("state", {}).get(CUT_STATUS_STATE_KEY)
                    status = cut or (500 if failed else CLIENT_CLOSED_REQUEST)
                write_line()
