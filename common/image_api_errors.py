"""The image API's error bodies, for whoever answers a request of its paths: the service's routes and middleware
(app/api/) and the starting gate in front of it (starting_gate/). OpenAI's shape on the OpenAI-compatible routes
(`/v1/images/...`, `/v1/models`), the API's own `{"error": message, "detail"?: [...]}` elsewhere.

The official `openai` client reads `{"error": {"message", "type", "param", "code"}}`: it picks its exception
class by status (BadRequestError, AuthenticationError, RateLimitError, ...) and puts only `error.message`
in the exception's text (openai 3.51.0 `_base_client.py` `_make_status_error_from_response`), so an
error in the project's own `{"error": "text"}` shape would reach an SDK user as a bare "Error code: 400".
"""

from __future__ import annotations

import json
from typing import Any, Final

from common.image_api_paths import OPENAI_IMAGES_PREFIX
from common.openai_models import MODEL_PATH_PREFIX, MODELS_PATH

# The `type` OpenAI's API gives each status (as the LLM gateway's llm_gateway/errors.py); others are server errors.
ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    """True for the paths whose errors take OpenAI's shape, whoever answers them (route, middleware, sign-in)."""
    return path.startswith((OPENAI_IMAGES_PREFIX, MODEL_PATH_PREFIX)) or path == MODELS_PATH


def openai_error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """`{"error": {"message", "type", "param", "code"}}` for `status`."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_payload(path: str, status: int, message: str, detail: list[dict[str, str]] | None = None) -> bytes:
    """The JSON bytes of an error answered before any route runs: OpenAI's shape on its paths, else the API's
    own `{"error": message, "detail"?: [...]}`."""
    if is_openai_path(path):
        param = detail[0]["field"] if detail else None
        return json.dumps(openai_error_body(status, message, param=param)).encode()
    return json.dumps({"error": message} if detail is None else {"error": message, "detail": detail}).encode()
