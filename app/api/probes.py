"""Kubernetes probes: liveness (the event loop answers) and readiness (model loaded and warm)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from app.api.dependencies import get_service
from app.service import GenerationService
from common.probe_paths import HEALTH_PATH, READINESS_PATH

router = APIRouter(tags=["probes"])


@router.get(HEALTH_PATH)
async def health() -> dict[str, str]:
    """200 while the process and its event loop are alive."""
    return {"status": "ok"}


@router.get(READINESS_PATH, responses={503: {"description": "loading, warming up, failed to load, or draining"}})
async def readiness(service: Annotated[GenerationService, Depends(get_service)]) -> JSONResponse:
    """200 once the model is loaded and warmed up; 503 before that and while shutting down."""
    if service.ready:
        return JSONResponse({"status": "ready"})
    body: dict[str, str] = {"status": "loading"}
    if service.draining:
        body = {"status": "draining"}
    elif service.load_error_id:
        # The exception itself is in the log line with this id, not here.
        body = {"status": "load failed", "error_id": service.load_error_id}
    return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})
