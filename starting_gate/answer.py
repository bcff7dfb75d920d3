"""The "starting" answer: 503 with Retry-After, as JSON for programs and as a page that reloads for people."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from common.image_api_errors import is_openai_path, openai_error_body

STARTING_STATUS = 503


def starting_message(minutes: int) -> str:
    """What a client is told while the first node and model come up."""
    return f"starting, about {minutes} minutes: no serving pod is ready yet; the pool is scaling up from zero"


def wants_html(request: Request) -> bool:
    """A browser asking for a page (the UI at /), not a program calling the API."""
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")


def starting_response(request: Request, minutes: int, retry_after_s: int) -> Response:
    """The 503 answer; queued jobs are not lost meanwhile, they wait in the queue for the first pod."""
    headers = {"Retry-After": str(retry_after_s), "Cache-Control": "no-store"}
    message = starting_message(minutes)
    if wants_html(request):
        page = (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{retry_after_s}'><title>Starting</title></head>"
            f"<body><h1>Starting</h1><p>{message}.</p><p>This page reloads every {retry_after_s} seconds.</p>"
            "</body></html>"
        )
        return HTMLResponse(page, status_code=STARTING_STATUS, headers=headers)
    if is_openai_path(request.url.path):  # the official client reads only OpenAI's shape (code: "starting")
        body = openai_error_body(STARTING_STATUS, message, code="starting")
    else:
        body = {"error": "starting", "detail": message, "retry_after_seconds": retry_after_s}
    return JSONResponse(body, status_code=STARTING_STATUS, headers=headers)
