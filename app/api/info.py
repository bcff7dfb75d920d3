"""GET /v1/info: what this replica runs (backend, device, model, compiled shape, versions, limits)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from app.api.dependencies import get_service
from app.service import GenerationService

router = APIRouter(prefix="/v1", tags=["info"])


@router.get("/info")
async def info(service: Annotated[GenerationService, Depends(get_service)]) -> dict[str, Any]:
    """Backend, device, model, compiled shape, library versions, limits and batching statistics."""
    return service.info()
