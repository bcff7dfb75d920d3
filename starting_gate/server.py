"""The gate's ASGI app: every path goes to the upstream while a pod takes it, else gets the starting answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from common.probe_paths import HEALTH_PATH
from starting_gate.answer import starting_response
from starting_gate.demand import DemandCounter
from starting_gate.proxy import forward
from starting_gate.settings import GateSettings

# The gate answers the ALB's health check itself (the image service's liveness path): the gate is the target, and
# it must stay healthy while no serving pod exists.
GATE_HEALTH_PATH = HEALTH_PATH
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def create_app(
    settings: GateSettings, counter: DemandCounter | None = None, on_shutdown: Callable[[], None] | None = None
) -> Starlette:
    """The gate for `settings`; `counter` counts the requests that found no ready pod (the demand to publish);
    `on_shutdown` runs once the server has stopped serving (uvicorn then re-raises SIGTERM, which ends the
    process before any code after `uvicorn.run`)."""
    demand = counter if counter is not None else DemandCounter()
    timeout = httpx.Timeout(settings.request_timeout_s, connect=settings.connect_timeout_s)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            app.state.client = client
            try:
                yield
            finally:
                if on_shutdown is not None:
                    on_shutdown()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "waiting_requests_seen": demand.total})

    async def gate(request: Request) -> Response:
        answer = await forward(request.app.state.client, settings.upstream, request)
        if answer is not None:
            return answer
        demand.add()
        return starting_response(request, settings.starting_minutes, settings.retry_after_s)

    app = Starlette(
        routes=[
            Route(GATE_HEALTH_PATH, health, methods=["GET"]),
            Route("/{path:path}", gate, methods=_METHODS),
        ],
        lifespan=lifespan,
    )
    app.state.demand = demand
    return app
