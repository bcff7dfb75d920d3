"""Answer unknown /v1 paths and wrong methods in the API's error shape, before the UI's mount sees them.

The Gradio UI is mounted at `/`, and Starlette's router lets a full match (the mount matches every
path) win over a route that matches the path but not the method. Without this, `GET /v1/generate`
and `/v1/nothing` fell through to Gradio's `404 {"detail": ...}`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount

from app.api.openai_errors import openai_error
from common.image_api_errors import is_openai_path

API_PREFIX = "/v1"
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]


def install_api_fallback(app: FastAPI) -> None:
    """Add a catch-all for `/v1/...`; call it after every /v1 router is included, before the UI is mounted."""

    @app.api_route(API_PREFIX, methods=_METHODS, include_in_schema=False)
    @app.api_route(f"{API_PREFIX}/{{rest:path}}", methods=_METHODS, include_in_schema=False)
    async def api_fallback(request: Request, rest: str = "") -> JSONResponse:
        path = request.url.path

        def serves(route: BaseRoute, method: str) -> bool:
            if isinstance(route, Mount) or getattr(route, "endpoint", None) is api_fallback:
                return False
            match, _ = route.matches({**request.scope, "method": method})
            return match is Match.FULL

        allowed = [method for method in _METHODS if any(serves(route, method) for route in app.router.routes)]
        if allowed:
            return _error(
                path,
                405,
                f"{request.method} is not allowed on {path}; use {', '.join(allowed)}",
                {"Allow": ", ".join(allowed)},
            )
        return _error(path, 404, f"no API path {path}; see /docs")


def _error(path: str, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The API's error shape, or OpenAI's on its routes."""
    if is_openai_path(path):
        return openai_error(status, message, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)
