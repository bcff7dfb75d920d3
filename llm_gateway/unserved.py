"""Why the engine has no route for an OpenAI path: its bare 404 turned into an OpenAI-shaped one that says why.

vLLM mounts each model path only for the runner it was started with (llm_gateway/routes.py): a generation model
has no /v1/embeddings, an embedding model (the pooling runner) no /v1/completions, /v1/chat/completions or
/v1/responses. For a path it did not mount it answers FastAPI's own `{"detail": "Not Found"}`, which the
`openai` client shows as a bare "Not Found". The gateway answers that case with the same 404 status (the client
raises NotFoundError, and does not retry it as it would a 5xx such as 501) and a message naming what is missing.
A 404 of vLLM's own error shape (an unknown model name, say) passes through unchanged.
"""

from __future__ import annotations

import json

from llm_gateway.errors import error_body
from llm_gateway.routes import EMBEDDINGS_PATH

# What each kind of engine needs to serve a path, for the message.
_NEEDS_EMBEDDING_MODEL = (
    "the model served here generates text and makes no embeddings: /v1/embeddings needs an embedding model, "
    "which vLLM serves with `--runner pooling` (a generation model converted with `--convert embed`); "
    "locally `make run-llm-embed` serves one"
)
_NEEDS_GENERATION_MODEL = (
    "the model served here is an embedding model (vLLM's pooling runner), which serves /v1/embeddings only: "
    "{path} needs a text-generation model"
)


def is_bare_not_found(status: int, content: bytes) -> bool:
    """True for the engine's 404 of a path it did not mount (FastAPI's body, not an OpenAI error object)."""
    if status != 404:
        return False
    try:
        payload = json.loads(content)
    except ValueError:
        return True
    return not (isinstance(payload, dict) and isinstance(payload.get("error"), dict))


def unserved_body(path: str) -> bytes:
    """The OpenAI-shaped 404 body for a model path the engine did not mount."""
    message = _NEEDS_EMBEDDING_MODEL if path == EMBEDDINGS_PATH else _NEEDS_GENERATION_MODEL.format(path=path)
    return error_body(404, message)
