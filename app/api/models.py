"""GET /v1/models and GET /v1/models/{id}: OpenAI's model list and retrieve-model, for the one model served.

OpenAI-compatible clients list the models before they use one (`client.models.list()`); the entry's id is the
`model` that /v1/images/generations accepts, and its `family` says which sizes and controls apply (GET /v1/info
has the rest). The shape is common/openai_models.py's; an unknown id is a 404 in OpenAI's error shape.
"""

# No `from __future__ import annotations`: FastAPI must see the route's parameter types at run time.
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from app.api.dependencies import get_service
from app.api.openai_errors import openai_error
from app.service import GenerationService
from common.image_api_errors import openai_error_body
from common.openai_models import MODEL_PATH_PREFIX, MODELS_PATH, image_model_entry, model_list


class ModelObject(BaseModel):
    """OpenAI's model object, with the image model's family."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    family: str


class ModelList(BaseModel):
    """OpenAI's list of model objects."""

    object: Literal["list"]
    data: list[ModelObject]


_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "description": "no model of that id is served here",
        "content": {"application/json": {"example": openai_error_body(404, "the model 'x' does not exist here")}},
    }
}


def models_router() -> APIRouter:
    """The router for the model list and retrieve-model; `created` is when it was made (the server's start)."""
    router = APIRouter(tags=["openai"])
    created = int(time.time())

    def entry(service: GenerationService) -> dict[str, Any]:
        return image_model_entry(service.model_name, service.family.name, created)

    @router.get(MODELS_PATH, response_model=ModelList)
    async def list_models(service: Annotated[GenerationService, Depends(get_service)]) -> dict[str, Any]:
        """OpenAI's model list: the one image model served here, with its family."""
        return model_list([entry(service)])

    # `:path`: a Hub id holds a slash (the openai client quotes it, the server decodes it before routing).
    @router.get(MODEL_PATH_PREFIX + "{model_id:path}", response_model=ModelObject, responses=_NOT_FOUND)
    async def retrieve_model(model_id: str, service: Annotated[GenerationService, Depends(get_service)]) -> Any:
        """OpenAI's retrieve-model: the served model's entry, or a 404 naming it."""
        if model_id != service.model_name:
            message = f"the model {model_id!r} does not exist here; this server serves {service.model_name!r}"
            return openai_error(404, message, param="model", code="model_not_found")
        return entry(service)

    return router
