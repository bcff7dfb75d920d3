"""Error handlers: every error is JSON with a readable message, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.logs import log_failure

log = logging.getLogger(__name__)


def _field(loc: tuple[object, ...]) -> str:
    """("body", "steps") -> "steps"; the JSON body itself -> "body"."""
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def _describe(error: dict[str, Any]) -> dict[str, str]:
    if error.get("type") == "json_invalid":
        reason = error.get("ctx", {}).get("error", "")
        return {"field": "body", "message": f"the body is not valid JSON ({reason})" if reason else "not valid JSON"}
    if error.get("type") == "model_attributes_type":
        return {"field": "body", "message": "send a JSON object with Content-Type: application/json"}
    return {"field": _field(tuple(error.get("loc", ()))), "message": error.get("msg", "invalid")}


def describe_errors(errors: Sequence[Any]) -> tuple[str, list[dict[str, str]]]:
    """Pydantic errors -> ("invalid request: field: message; ...", [{field, message}]), no input echo.

    The API's 422 and the UI's error message both come from here, so they read the same.
    """
    detail = [_describe(e) for e in errors]
    summary = "; ".join(f"{d['field']}: {d['message']}" for d in detail)
    return f"invalid request: {summary}", detail


async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 listing each bad field with pydantic's message (no input echo: bodies may be huge)."""
    message, detail = describe_errors(exc.errors())
    return JSONResponse({"error": message, "detail": detail}, status_code=422)


async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette/FastAPI HTTP errors (404, 405, ...) in the same shape as ours."""
    return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """500 with an id that appears in the log line holding the traceback."""
    error_id = log_failure(log, f"unhandled error on {request.url.path}", exc)
    return JSONResponse({"error": "internal error", "error_id": error_id}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on `app`."""
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected_error)
