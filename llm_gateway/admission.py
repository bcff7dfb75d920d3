"""Admission of generation requests: a bound on the sequences in flight, and the drain on shutdown.

The bound counts sequences, not requests: a request with `n=8` or a list of 8 prompts is 8 of the engine's
sequences, and would otherwise take the engine from everyone else while counting as one. A request alone
larger than the bound is refused for good (400, by the caller). Beyond the bound a request is refused at once
with a 429 (the client retries after Retry-After) rather than queued in the gateway: vLLM keeps its own
queue, and one queue is easier to reason about and scale on.
While draining, new requests get a 503 and open ones run on; at the end of the grace the ones still open
are cut (`Ticket.cut` is done: their handler ends the stream with an error event and closes the upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass(eq=False)
class Ticket:
    """One admitted request of `sequences`; `cut` is done when the drain's grace runs out before it finished (a
    future, whose callback stops the work without a task waiting on it)."""

    sequences: int = 1
    cut: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Admission:
    """At most `limit` sequences at a time; `drain` stops admitting and waits for the open tickets."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.draining = False
        self._open: set[Ticket] = set()
        self._sequences = 0
        self._idle: asyncio.Future[None] | None = None  # while a drain waits: done when the last ticket closes

    @property
    def in_flight(self) -> int:
        """How many admitted sequences are still open."""
        return self._sequences

    def try_admit(self, sequences: int = 1) -> Ticket | None:
        """A ticket for `sequences`, or None when they do not fit under the bound now (draining and a request
        larger than the bound are the caller's to check, for their 503 and 400)."""
        if self._sequences + sequences > self.limit:
            return None
        ticket = Ticket(sequences)
        self._open.add(ticket)
        self._sequences += sequences
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The request ended (answered, failed, cut or abandoned by its client); a second release is a no-op."""
        if ticket not in self._open:
            return
        self._open.remove(ticket)
        self._sequences -= ticket.sequences
        if not self._open and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    async def drain(self, timeout_s: float) -> int:
        """Stop admitting; wait up to `timeout_s` for the open requests, then cut the rest; return how many."""
        self.draining = True
        if self._open:
            # Made only when a drain waits: an Event kept for it cost every request a set and a clear.
            self._idle = asyncio.get_running_loop().create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle, timeout_s)
        remaining = list(self._open)
        for ticket in remaining:
            if not ticket.cut.done():
                ticket.cut.set_result(None)
        return len(remaining)
