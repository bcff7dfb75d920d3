"""Serving the gateway with uvicorn, and the drain on SIGTERM within one grace period.

Kubernetes sends SIGTERM and keeps routing for a moment. The first SIGTERM flips readiness to 503 and
refuses new generations (503, Retry-After) while open ones, streams included, run on; when they are done,
or SHUTDOWN_GRACE_S less a short reserve has passed, the ones still open are cut (their stream ends with
an error event and vLLM aborts them) and uvicorn gets the reserve to send those last bytes and close.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from types import FrameType

import uvicorn

from app.auth.tokens import TokenVerifier
from app.logs import JsonFormatter
from app.metrics.flusher import make_publisher
from llm_gateway.admission import Admission
from llm_gateway.gateway import Gateway, upstream_client
from llm_gateway.settings import GatewaySettings

ANSWER_RESERVE_S = 2.0
"""At most this much of the grace is kept for ending cut streams and closing connections."""


def answer_reserve_s(grace_s: float) -> float:
    """The part of the grace kept back from the drain: 2 s, or a quarter of a short grace."""
    return min(ANSWER_RESERVE_S, grace_s / 4)


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first SIGTERM drains the open generations before exiting."""

    def __init__(self, config: uvicorn.Config, admission: Admission, grace_s: float) -> None:
        super().__init__(config)
        self._admission = admission
        self._grace_s = grace_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None
        config.timeout_graceful_shutdown = grace_s  # type: ignore[assignment]  # Ctrl-C: uvicorn's wait

    async def serve(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        """Remember the loop, so the signal handler can schedule the drain on it."""
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """First SIGTERM: drain, then exit. Anything else (Ctrl-C, a second SIGTERM): uvicorn's usual."""
        if sig == signal.SIGTERM and self._drain is None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._start_drain, sig, frame)
            return
        super().handle_exit(sig, frame)

    def _start_drain(self, sig: int, frame: FrameType | None) -> None:
        deadline = time.monotonic() + self._grace_s

        async def drain_then_exit() -> None:
            await self._admission.drain(max(0.0, self._grace_s - answer_reserve_s(self._grace_s)))
            self.config.timeout_graceful_shutdown = max(0.1, deadline - time.monotonic())  # type: ignore[assignment]
            super(DrainingServer, self).handle_exit(sig, frame)

        self._drain = asyncio.create_task(drain_then_exit(), name="drain")


def configure_logging(level: str) -> None:
    """JSON lines on stderr (the image service's format), one per request among them."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)


def build_gateway(settings: GatewaySettings) -> Gateway:
    """The gateway for `settings`: its upstream client, the token verifier when AUTH=cognito, and the
    metrics publisher METRICS names."""
    verifier = TokenVerifier(settings.auth_issuer, settings.auth_client_id_list) if settings.auth == "cognito" else None
    return Gateway(
        settings, http=upstream_client(settings), verifier=verifier, publisher=make_publisher(settings.metrics)
    )


def build_server(gateway: Gateway, settings: GatewaySettings) -> DrainingServer:
    """The uvicorn server for `gateway` on HOST:PORT (no access log: the gateway logs each request itself)."""
    config = uvicorn.Config(
        gateway,
        host=settings.host,
        port=settings.port,
        timeout_keep_alive=settings.keep_alive_s,
        access_log=False,
        log_config=None,
        lifespan="on",
    )
    return DrainingServer(config, gateway.admission, settings.shutdown_grace_s)
