"""ASGI middleware: a body size limit for every route, and one JSON log line per request."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.http.body import BodyLimits, BodyTooLarge, read_body
from common.http.disconnect import CLIENT_CLOSED_REQUEST, ClientDisconnected
from common.http.protocol import CUT_STATUS_STATE_KEY
from common.image_api_errors import error_payload
from common.probe_paths import HEALTH_PATH, READINESS_PATH

log = logging.getLogger("app.requests")


def _log_level(path: str) -> int:
    """API calls and page loads at INFO; probes (every few seconds) and the UI's own assets/polling at DEBUG."""
    if path in (HEALTH_PATH, READINESS_PATH):
        return logging.DEBUG
    return logging.INFO if path == "/" or path.startswith("/v1/") else logging.DEBUG


async def send_json_error(
    send: Send,
    status: int,
    message: str,
    *,
    detail: list[dict[str, str]] | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    close: bool = True,
    path: str = "",
) -> None:
    """Answer `{"error": message}` (with `detail`, the bad fields, when given) straight from ASGI middleware
    (before any route runs); on the OpenAI-compatible routes (`path`) in OpenAI's error shape."""
    payload = error_payload(path, status, message, detail)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """Answer 413 to any request (API, UI, Gradio's own routes) whose body is larger than its path's limit:
    `path_limits` for the routes that carry images (edits, the UI's uploads), `limits.max_bytes` for every other.

    The body is read with the shared bounded reader (common/http/body.py) before anything parses it, and
    replayed to the app.
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: BodyLimits,
        path_limits: Mapping[str, BodyLimits] | None = None,
    ):
        self.app = app
        self.limits = limits
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limits = self.path_limits.get(scope["path"].rstrip("/"), self.limits)
        try:
            body = await read_body(receive, headers, limits)
        except ClientDisconnected:
            return
        except BodyTooLarge:
            message = f"request body larger than {limits.max_bytes} bytes"
            await send_json_error(send, 413, message, path=scope["path"])
            return
        whole = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, replaying(whole, receive), send)


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
