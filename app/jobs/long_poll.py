"""The job worker's long poll, on a daemon thread of its own.

A receive waits up to JOBS_POLL_S for a job. On asyncio's default executor (`asyncio.to_thread`)
nothing could stop the process before it returned: `asyncio.run` and the interpreter's exit both join
that executor's threads, so even an idle process took up to JOBS_POLL_S to exit, whatever
SHUTDOWN_GRACE_S said. A daemon thread is not joined. What a poll receives after its worker stopped
listening is handed back (visible again) from that thread, as long as the process lives; a poll
still waiting when the process exits is cut with it (on SQS a message it was being handed may then
stay hidden for one visibility timeout, and comes back).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time

from app.jobs.ports import Delivery, JobQueue
from common.logs import log_failure

log = logging.getLogger(__name__)


class LongPoll:
    """Receives from a queue on daemon threads, one poll at a time."""

    def __init__(self, queue: JobQueue):
        self.queue = queue
        self._ends_at: float | None = None  # when the poll in flight ends at the latest (monotonic)

    def hidden_s(self) -> int:
        """Seconds until the poll in flight ends (0 when none is): a job handed back stays hidden that
        long, so that this process's last poll cannot take it again."""
        if self._ends_at is None:
            return 0
        return max(0, math.ceil(self._ends_at - time.monotonic()))

    async def receive(self, max_messages: int, wait_s: float, visibility_s: int) -> list[Delivery]:
        """`queue.receive(...)` on a daemon thread; if the caller stops waiting, what arrives is handed back."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Delivery]] = loop.create_future()

        def settle(deliveries: list[Delivery], error: Exception | None) -> None:  # on the event loop
            if future.done():  # the caller was cancelled while the poll waited
                _start(self._give_back, deliveries)
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result(deliveries)

        def poll() -> None:  # on the daemon thread
            deliveries: list[Delivery] = []
            error: Exception | None = None
            try:
                deliveries = self.queue.receive(max_messages, wait_s, visibility_s)
            except Exception as exc:
                error = exc
            self._ends_at = None  # here, not when the caller stops waiting: the poll itself has ended
            try:
                loop.call_soon_threadsafe(settle, deliveries, error)
            except RuntimeError:  # the event loop is closed: the service stopped
                self._give_back(deliveries)

        self._ends_at = time.monotonic() + wait_s
        _start(poll)
        return await future

    def _give_back(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            try:
                self.queue.extend(delivery, 0)
            except Exception as exc:  # it comes back after its visibility timeout
                log_failure(log, "handing back a job received while stopping failed", exc)


def _start(target: object, *args: object) -> None:
    threading.Thread(target=target, args=args, daemon=True, name="job-poll").start()  # type: ignore[arg-type]
