"""Error handlers: every error is JSON with a readable message, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.api.openai_errors import openai_error
from app.api.schemas import ErrorResponse
from common.image_api_errors import is_openai_path
from common.logs import log_failure

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


# FastAPI's answer to a body it cannot decode at all (fastapi 0.163 routing.py: a JSON body that is not
# UTF-8 text); JSON it can decode but not parse is already a 422 (json_invalid).
_UNPARSABLE_BODY = "There was an error parsing the body"


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette/FastAPI HTTP errors (404, 405, ...) in the same shape as ours (OpenAI's on its routes)."""
    if is_openai_path(request.url.path):
        return openai_error(exc.status_code, str(exc.detail), headers=exc.headers)
    if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
        # Not JSON, like any other body that is not JSON: the documented 422, not an undocumented 400.
        problem = {"field": "body", "message": "the body is not valid JSON (not UTF-8 text)"}
        return JSONResponse({"error": f"invalid request: body: {problem['message']}", "detail": [problem]}, 422)
    return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """500 with an id that appears in the log line holding the traceback."""
    error_id = log_failure(log, f"unhandled error on {request.url.path}", exc)
    return JSONResponse({"error": "internal error", "error_id": error_id}, status_code=500)


# FastAPI documents every 422 as its own {"detail": [{loc, msg, type}]}; validation_error answers
# ErrorResponse instead (fastapi 0.163 openapi/utils.py adds these two schemas to every operation with input).
_FASTAPI_422_SCHEMAS = ("HTTPValidationError", "ValidationError")


def _document_error_shape(schema: dict[str, Any]) -> dict[str, Any]:
    """Point every documented 422 at ErrorResponse, the body validation_error really sends."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in error_schema.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components.setdefault("ErrorResponse", error_schema)
    fastapi_ref = f"#/components/schemas/{_FASTAPI_422_SCHEMAS[0]}"
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            response = operation.get("responses", {}).get("422")
            content = (response or {}).get("content", {}).get("application/json", {})
            if content.get("schema", {}).get("$ref") == fastapi_ref:
                content["schema"] = {"$ref": "#/components/schemas/ErrorResponse"}
                response["description"] = "invalid input: the message names each bad field"
    for name in _FASTAPI_422_SCHEMAS:
        components.pop(name, None)
    return schema


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on `app`, and document their 422 body in its OpenAPI schema."""
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected_error)
    build_schema = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _document_error_shape(build_schema())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
