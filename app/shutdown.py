"""Graceful shutdown: on SIGTERM drain the service first, then let uvicorn stop.

Kubernetes sends SIGTERM and keeps routing for a moment; during the drain readiness is 503, new
generations are refused with 503, and queued and running ones finish (up to SHUTDOWN_GRACE_S).
"""

from __future__ import annotations

import asyncio
import signal
from types import FrameType

import uvicorn

from app.service import GenerationService


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first SIGTERM drains the generation service before exiting."""

    def __init__(self, config: uvicorn.Config, service: GenerationService):
        super().__init__(config)
        self._service = service
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None

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
        async def drain_then_exit() -> None:
            # The same grace uvicorn gives open connections (SHUTDOWN_GRACE_S).
            await self._service.drain(self.config.timeout_graceful_shutdown)
            super(DrainingServer, self).handle_exit(sig, frame)

        self._drain = asyncio.create_task(drain_then_exit(), name="drain")
