"""FastAPI dependencies: routes get the service from the app, so tests can build the app with any backend."""

from __future__ import annotations

from fastapi import Request

from app.auth.middleware import CALLER_STATE_KEY
from app.service import GenerationService

ANONYMOUS_CALLER = "anonymous"


def get_service(request: Request) -> GenerationService:
    """The GenerationService this app was created with."""
    return request.app.state.service


def get_caller_id(request: Request) -> str:
    """The verified caller's id, which the sign-in middleware (app/auth) puts in the request's state;
    "anonymous" when authentication is off. Jobs are scoped by it."""
    return getattr(request.state, CALLER_STATE_KEY, None) or ANONYMOUS_CALLER
