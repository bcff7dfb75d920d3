"""FastAPI dependencies: routes get the service from the app, so tests can build the app with any backend."""

from __future__ import annotations

from fastapi import Request

from app.service import GenerationService


def get_service(request: Request) -> GenerationService:
    """The GenerationService this app was created with."""
    return request.app.state.service
