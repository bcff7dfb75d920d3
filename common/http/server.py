"""Graceful shutdown: on SIGTERM (or Ctrl-C) drain the service, then let uvicorn stop, all within one grace period.

Kubernetes sends SIGTERM and keeps routing for a moment; during the drain readiness is 503, new work
is refused with 503, and what is queued or running (streams included) finishes. SHUTDOWN_GRACE_S is the
whole budget: the drain gets it less a short reserve; what is still unanswered then is cut by the service
(the image service answers a JSON 503 with an error id, the gateway ends a stream with an error event),
and uvicorn gets the reserve to send those last bytes and close. The pods' terminationGracePeriodSeconds
(cdk/config/serving.py) is preStop + SHUTDOWN_GRACE_S + 5.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from collections.abc import Awaitable
from types import FrameType
from typing import Protocol

import uvicorn

log = logging.getLogger(__name__)

ANSWER_RESERVE_S = 2.0
"""At most this much of the grace is kept for answering cut requests and closing connections."""


def answer_reserve_s(grace_s: float) -> float:
    """The part of the grace kept back from the drain: 2 s, or a quarter of a short grace."""
    return min(ANSWER_RESERVE_S, grace_s / 4)


class Drainable(Protocol):
    """What a service offers the server: stop taking work, and wait up to `timeout_s` for the work in flight
    before cutting what is left."""

    def drain(self, timeout_s: float) -> Awaitable[object]:
        """Refuse new work (readiness 503), let in-flight work finish within `timeout_s`, then cut the rest."""
        ...


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first SIGTERM (or Ctrl-C) drains the service before exiting."""

    def __init__(self, config: uvicorn.Config, service: Drainable, grace_s: float):
        super().__init__(config)
        self._service = service
        self._grace_s = grace_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None
        self._signalled = False
        # Until SIGTERM, uvicorn's own wait (e.g. after Ctrl-C) is the whole grace.
        config.timeout_graceful_shutdown = grace_s  # type: ignore[assignment]

    async def serve(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        """Remember the loop, so the signal handler can schedule the drain on it."""
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        """uvicorn's startup, then move everything alive so far (modules, settings, the model) out of the garbage
        collector's sight: a full collection then walks only what requests create, so its pauses (which land in some
        request's latency) stay short."""
        await super().startup(sockets=sockets)
        gc.collect()
        gc.freeze()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The first SIGTERM or Ctrl-C: drain, then exit. A second Ctrl-C: exit now, not waiting for
        requests in flight. Anything else: uvicorn's usual."""
        if sig in (signal.SIGTERM, signal.SIGINT) and not self._signalled and self._loop is not None:
            self._signalled = True
            self._loop.call_soon_threadsafe(self._start_drain, sig, frame)
            return
        if sig == signal.SIGINT:
            self.should_exit = True  # so that uvicorn's handler below forces the exit
        super().handle_exit(sig, frame)

    def _start_drain(self, sig: int, frame: FrameType | None) -> None:
        # Logged here on the event loop, not in the signal handler (which may interrupt a log call).
        log.info("stopping", extra={"signal": signal.Signals(sig).name, "grace_s": self._grace_s})
        deadline = time.monotonic() + self._grace_s

        async def drain_then_exit() -> None:
            await self._service.drain(max(0.0, self._grace_s - answer_reserve_s(self._grace_s)))
            # What is left of the one grace period is uvicorn's, for the answers to the cut requests.
            self.config.timeout_graceful_shutdown = max(0.1, deadline - time.monotonic())  # type: ignore[assignment]
            super(DrainingServer, self).handle_exit(sig, frame)

        self._drain = asyncio.create_task(drain_then_exit(), name="drain")
