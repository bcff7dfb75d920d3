"""OpenAI's error shape for the OpenAI-compatible routes (`/v1/images/...`, `/v1/models`) as a route's response;
the shape itself, and why the official client needs it, is common/image_api_errors.py's."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from common.image_api_errors import openai_error_body


def openai_error(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """An OpenAI-shaped JSON error response."""
    return JSONResponse(openai_error_body(status, message, param=param, code=code), status_code=status, headers=headers)
