"""GET /v1/images/adapters: the LoRA adapters a request may name here, and which pool and backend serve them.

Each pod answers for itself: its pool (DEPLOYMENT_UNIT) and backend. On CPU and CUDA every adapter in LORA_DIR is
served at any scale within MAX_LORA_SCALE; on Neuron only the adapters fused at compile time (NEURON_LORAS), each at
its fused scale, and the others are listed as not served here, with the reason.
"""

# No `from __future__ import annotations`: FastAPI must see the route's parameter types at run time.
import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from app.api.dependencies import get_service
from app.service import GenerationService
from common.image_api_paths import IMAGES_ADAPTERS_PATH


class AdapterEntry(BaseModel):
    """One adapter in LORA_DIR."""

    name: str = Field(description="what `loras[].name` takes")
    size_bytes: int
    pool: str = Field(description="the pool answering (DEPLOYMENT_UNIT)")
    backend: str | None = Field(description="cpu, cuda or neuron; null while the model loads")
    served: bool = Field(description="whether this pool can apply it")
    fused_scale: float | None = Field(
        None, description="Neuron: the one scale it is served at (fused at compile time); null: any scale in bounds"
    )
    reason: str | None = Field(None, description="why this pool cannot serve it")


class AdapterList(BaseModel):
    """The adapters, sorted by name, and the scale bounds of a request."""

    object: Literal["list"] = "list"
    data: list[AdapterEntry]
    max_loras: int = Field(description="the most adapters one request may name (MAX_LORAS)")
    max_scale: float = Field(description="a scale must lie within -max_scale..max_scale (MAX_LORA_SCALE)")


def adapter_list(service: GenerationService) -> AdapterList:
    """The adapters in LORA_DIR as this pool serves them."""
    settings = service.settings
    backend = service.backend.name if service.backend is not None else None
    fused = {ref.name: ref.scale for ref in settings.neuron_fused_loras} if backend == "neuron" else None
    entries = []
    for adapter in service.adapters().values():
        served = fused is None or adapter.name in fused
        entries.append(
            AdapterEntry(
                name=adapter.name,
                size_bytes=adapter.size_bytes,
                pool=settings.deployment_unit,
                backend=backend,
                served=served,
                fused_scale=fused.get(adapter.name) if fused is not None else None,
                reason=None if served else "this Neuron pool serves only the adapters fused at compile time",
            )
        )
    return AdapterList(data=entries, max_loras=settings.max_loras, max_scale=settings.max_lora_scale)


def adapters_router() -> APIRouter:
    """The router for GET /v1/images/adapters."""
    router = APIRouter(tags=["openai"])

    @router.get(IMAGES_ADAPTERS_PATH, response_model=AdapterList)
    async def list_adapters(service: Annotated[GenerationService, Depends(get_service)]) -> AdapterList:
        """The LoRA adapters a request may name in `loras`, with their size and whether this pool serves them."""
        # The folder is read on each call (an adapter copied in while running counts): off the event loop.
        return await asyncio.to_thread(adapter_list, service)

    return router
