"""Admission of generation requests: a bound on how many are in flight, and the drain on shutdown.

Beyond the bound a request is refused at once with a 429 (the client retries after Retry-After) rather
than queued in the gateway: vLLM keeps its own queue, and one queue is easier to reason about and scale on.
While draining, new requests get a 503 and open ones run on; at the end of the grace the ones still open
are cut (`Ticket.cut` is set: their handler ends the stream with an error event and closes the upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass(eq=False)
class Ticket:
    """One admitted request; `cut` is set when the drain's grace runs out before it finished."""

    cut: asyncio.Event = field(default_factory=asyncio.Event)


class Admission:
    """At most `limit` tickets at a time; `drain` stops admitting and waits for the open ones."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.draining = False
        self._open: set[Ticket] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """How many admitted requests are still open."""
        return len(self._open)

    def try_admit(self) -> Ticket | None:
        """A ticket, or None when the bound is reached (draining is checked by the caller, for its 503)."""
        if len(self._open) >= self.limit:
            return None
        ticket = Ticket()
        self._open.add(ticket)
        self._idle.clear()
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The request ended (answered, failed, cut or abandoned by its client)."""
        self._open.discard(ticket)
        if not self._open:
            self._idle.set()

    async def drain(self, timeout_s: float) -> int:
        """Stop admitting; wait up to `timeout_s` for the open requests, then cut the rest; return how many."""
        self.draining = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        remaining = list(self._open)
        for ticket in remaining:
            ticket.cut.set()
        return len(remaining)
