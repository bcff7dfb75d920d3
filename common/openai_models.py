"""OpenAI's model list (`GET /v1/models`) and model object, as the image service and the LLM gateway answer them.

The shape is the installed `openai` 3.51.0's: `types/model.py` `Model` (`id`, `created`: Unix seconds,
`object: "model"`, `owned_by`) and `pagination.py` `SyncPage` (`object`, `data`), which `client.models.list()`
reads; `client.models.retrieve(id)` reads one `Model` from `/v1/models/{id}`. Each image model's entry adds its
`family` (`sd`, `sdxl`, `flux`), which the client keeps as an extra field. No heavy imports: the CDK app and the
gateway import this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

MODELS_PATH: Final = "/v1/models"
# OpenAI's "retrieve model": the rest of the path is the id (a Hub id holds a slash).
MODEL_PATH_PREFIX: Final = MODELS_PATH + "/"
# Who an id without a Hub organization belongs to (a built-in model, a folder's name): this project.
PROJECT_OWNER: Final = "sd-on-eks"


def owner_of(model_id: str) -> str:
    """`owned_by` of an image model: the Hub organization of an `org/name` id, else this project."""
    org, slash, _ = model_id.partition("/")
    return org if slash and org else PROJECT_OWNER


def image_model_entry(model_id: str, family: str, created: int) -> dict[str, Any]:
    """One image model's OpenAI model object, with its family."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": owner_of(model_id), "family": family}


def model_list(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """OpenAI's list of model objects."""
    return {"object": "list", "data": list(entries)}
