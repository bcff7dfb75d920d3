"""The job worker inside every serving pod: takes jobs while the batcher has room, runs them, settles them.

- Room: a job is taken, and handed to the batcher, only while no interactive request is in the
  batcher (waiting, gathered or running) and the pod holds fewer than JOBS_CONCURRENCY jobs. Jobs
  never share a batch an interactive request started, and a request arriving behind a batch of
  jobs waits for that one batch only. A job taken just before requests arrived waits for a gap, at
  most JOBS_VISIBILITY_S, then queues like a request (no starvation on a pod that stays busy).
- Hold: while a job runs, its message's visibility is extended every third of JOBS_VISIBILITY_S;
  the record's lease follows, so a reader can tell a live job from one whose worker died.
- Attempts: the record counts them, not the queue. An attempt is counted when it starts; a job
  handed back at shutdown gets it back; a worker that died mid-attempt (its lease lapsed) spent it,
  and the next delivery records that. JOBS_MAX_RECEIVES attempts, then the job is `failed`.
- Settle: the image and the `succeeded` record are stored (or the `failed` one), the notice is
  published once, and only then is the message deleted. A failed attempt with attempts left is
  recorded on the job and its message comes back after a short back-off.
- Dead letters: a message the queue gave up on (JOBS_QUEUE_MAX_RECEIVES deliveries, say a job handed
  back at every restart) is swept from the dead-letter queue: its job is `failed` and announced.
- Drain (SIGTERM): take nothing more; jobs already held get the grace period to finish, and the
  ones that cannot are handed back, hidden only until this pod's last long poll ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from app.api.generate import png_bytes
from app.backends.base import UnsupportedRequest
from app.batching import DeadlineExceeded, QueueFull, ShutdownCut
from app.jobs.long_poll import LongPoll
from app.jobs.model import TERMINAL_STATES, JobRecord, JobState
from app.jobs.ports import Delivery, JobQueue, JobStore, Notifier
from app.params import resolve_body
from app.service import GenerationService, NotReady
from app.settings import Settings
from common.logs import log_failure

log = logging.getLogger(__name__)

ROOM_POLL_S = 0.05  # how often a worker without room looks again (a cheap check on the event loop)
RECEIVE_ERROR_PAUSE_S = 5.0
HAND_BACK_S = 1.0  # of the drain's grace, kept for handing back the jobs that cannot finish (a quarter at most)
MAX_RETRY_DELAY_S = 60
MIN_SWEEP_INTERVAL_S = 1.0  # dead letters are looked for every JOBS_POLL_S, at most this often
DEAD_LETTERS_PER_SWEEP = 10


class _HandedBack(Exception):
    """The pod is draining: the job goes back to the queue untouched."""


def retry_delay_s(attempt: int) -> int:
    """Back-off before a failed job is handed out again: 1, 2, 4, ... seconds, at most a minute."""
    return min(2 ** max(attempt - 1, 0), MAX_RETRY_DELAY_S)


class JobWorker:
    """Consumes the job queue on the service's event loop."""

    def __init__(
        self,
        settings: Settings,
        generation: GenerationService,
        queue: JobQueue,
        store: JobStore,
        notifier: Notifier,
        on_finished: Callable[[JobState], None] | None = None,
    ):
        self.settings = settings
        self.generation = generation
        self.queue = queue
        self.store = store
        self.notifier = notifier
        self._on_finished = on_finished
        self.visibility_s = settings.jobs_visibility_s
        self._held: dict[str, asyncio.Task[None]] = {}  # by receipt
        self._held_jobs: set[str] = set()  # their job ids
        self._in_batcher = 0  # held jobs inside GenerationService.generate now
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._poll = LongPoll(queue)  # on a daemon thread: a stopping process does not sit out the poll

    @property
    def held(self) -> int:
        """Jobs this pod holds now."""
        return len(self._held)

    def start(self) -> None:
        """Start consuming on the running event loop."""
        self._loop_task = asyncio.create_task(self._consume(), name="job-worker")
        self._sweep_task = asyncio.create_task(self._sweep_dead_letters(), name="job-dead-letters")

    def _interactive_busy(self) -> bool:
        """True while the service is not serving, or interactive requests are in the batcher."""
        service = self.generation
        batcher = service.batcher
        if self._stopping or not service.ready or service.draining or batcher is None:
            return True
        return batcher.in_flight > self._in_batcher

    def room(self) -> int:
        """How many more jobs to take now: none while interactive requests are in the batcher."""
        batcher = self.generation.batcher
        if self._interactive_busy() or batcher is None:
            return 0
        return max(0, min(self.settings.jobs_concurrency - len(self._held), batcher.capacity - batcher.in_flight))

    async def _consume(self) -> None:
        while not self._stopping:
            room = self.room()
            if room <= 0:
                await asyncio.sleep(ROOM_POLL_S)
                continue
            try:
                deliveries = await self._poll.receive(room, self.settings.jobs_poll_s, self.visibility_s)
            except Exception as exc:
                log_failure(log, "receiving jobs failed; retrying", exc)
                await asyncio.sleep(RECEIVE_ERROR_PAUSE_S)
                continue
            for delivery in deliveries:
                if self._stopping:  # received during the drain's last poll: hand back at once
                    await self._hand_back(delivery, None)
                    continue
                if delivery.job_id in self._held_jobs:  # a duplicate message of a job this pod runs: later
                    await asyncio.to_thread(self.queue.extend, delivery, self.visibility_s)
                    continue
                task = asyncio.create_task(self._process_logged(delivery), name=f"job-{delivery.job_id}")
                self._held[delivery.receipt] = task
                self._held_jobs.add(delivery.job_id)
                task.add_done_callback(lambda _t, d=delivery: self._release(d))

    def _release(self, delivery: Delivery) -> None:
        self._held.pop(delivery.receipt, None)
        self._held_jobs.discard(delivery.job_id)

    async def _process_logged(self, delivery: Delivery) -> None:
        try:
            await self._process(delivery)
        except Exception as exc:  # the store or queue failed: the message returns after its timeout
            log_failure(log, f"job {delivery.job_id}: settling failed; it will be delivered again", exc)

    async def _process(self, delivery: Delivery) -> None:
        record = await asyncio.to_thread(self.store.get, delivery.job_id)
        if record is None:
            # Records are written before their message is sent, so this job expired or never existed.
            log.warning("a message names no job record; deleting it", extra={"job_id": delivery.job_id})
            await asyncio.to_thread(self.queue.delete, delivery)
            return
        if record.state in TERMINAL_STATES:  # a duplicate delivery, or one whose settling was cut short
            await self._finish(delivery, record)
            return
        now = time.time()
        if record.state is JobState.RUNNING and not record.worker_stopped(now):
            # Another worker holds it (a duplicate delivery): look again once its lease would lapse.
            assert record.lease_until is not None
            await asyncio.to_thread(self.queue.extend, delivery, math.ceil(record.lease_until - now) + 1)
            return
        if record.state is JobState.RUNNING:  # its worker died mid-attempt: that attempt is spent
            if record.attempts >= record.max_attempts:
                failed = record.touch(
                    state=JobState.FAILED,
                    error=record.final_error(record.stopped_error()),
                    finished_at=now,
                    lease_until=None,
                )
                await self._conclude(delivery, failed)
                return
            record = record.touch(state=JobState.QUEUED, error=record.stopped_error(), lease_until=None)
        before = record  # what a hand-back stores again: the attempt is given back
        record = record.touch(state=JobState.RUNNING, attempts=record.attempts + 1, lease_until=now + self.visibility_s)
        await asyncio.to_thread(self.store.put, record)
        finished = asyncio.Event()
        keeper = asyncio.create_task(self._keep_hidden(delivery, record, finished), name=f"job-lease-{record.id}")

        async def stop_keeping() -> None:
            # Let a lease write in progress land before ours, so it cannot overwrite the outcome.
            finished.set()
            await asyncio.gather(keeper, return_exceptions=True)

        try:
            png, backend = await self._run(record)
        except _HandedBack:
            await stop_keeping()
            await self._hand_back(delivery, before)
            return
        except asyncio.CancelledError:  # stop() or the end of the drain's grace period
            await asyncio.shield(stop_keeping())
            await asyncio.shield(self._hand_back(delivery, before))
            raise
        except Exception as exc:
            await stop_keeping()
            await self._failed_attempt(delivery, record, exc)
            return
        await stop_keeping()
        await asyncio.to_thread(self.store.put_image, record.id, png)
        done = record.touch(
            state=JobState.SUCCEEDED, error=None, finished_at=time.time(), lease_until=None, backend=backend
        )
        await self._conclude(delivery, done)

    async def _run(self, record: JobRecord) -> tuple[bytes, str]:
        """Generate the job's image through the shared batcher; PNG bytes and the backend's name."""
        params = await asyncio.to_thread(resolve_body, self.generation, record.request)
        # Requests that came in since the job was taken go first, but a job does not starve on a
        # pod that stays busy: after one visibility period it queues like a request.
        yield_until = time.monotonic() + self.visibility_s
        while True:
            if self.generation.draining:
                raise _HandedBack
            if self._interactive_busy() and time.monotonic() < yield_until:
                await asyncio.sleep(ROOM_POLL_S)
                continue
            self._in_batcher += 1
            try:
                result = await self.generation.generate(params, timeout_s=self.settings.jobs_timeout_s)
                break
            except QueueFull:
                await asyncio.sleep(ROOM_POLL_S)
            except (NotReady, ShutdownCut):  # draining: the shutdown grace ended before the image did
                raise _HandedBack from None
            finally:
                self._in_batcher -= 1
        png = await asyncio.to_thread(png_bytes, result.image)
        backend = self.generation.backend.name if self.generation.backend else "unknown"
        return png, backend

    async def _keep_hidden(self, delivery: Delivery, record: JobRecord, finished: asyncio.Event) -> None:
        """Extend the message's visibility and the record's lease every third of the timeout, until finished."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), self.visibility_s / 3)
                return
            try:
                await asyncio.to_thread(self.queue.extend, delivery, self.visibility_s)
                record = record.touch(lease_until=time.time() + self.visibility_s)
                await asyncio.to_thread(self.store.put, record)
            except Exception as exc:
                log_failure(log, "extending a job's visibility failed", exc)

    async def _failed_attempt(self, delivery: Delivery, record: JobRecord, exc: Exception) -> None:
        if isinstance(exc, UnsupportedRequest):
            error = f"this deployment cannot run the request: {exc}"
        elif isinstance(exc, DeadlineExceeded):
            error = f"no image within JOBS_TIMEOUT_S ({self.settings.jobs_timeout_s:g} s)"
        else:
            error_id = log_failure(log, f"job {record.id} attempt {record.attempts} failed", exc)
            error = f"generation failed (error id {error_id})"
        if record.attempts >= record.max_attempts:
            final = record.touch(
                state=JobState.FAILED, error=record.final_error(error), finished_at=time.time(), lease_until=None
            )
            await self._conclude(delivery, final)
            return
        retry = record.touch(
            state=JobState.QUEUED, error=f"attempt {record.attempts} failed: {error}", lease_until=None
        )
        await asyncio.to_thread(self.store.put, retry)
        await asyncio.to_thread(self.queue.extend, delivery, retry_delay_s(record.attempts))

    async def _conclude(self, delivery: Delivery | None, final: JobRecord) -> None:
        """Store the job's outcome unless another holder stored one first (the first one stands), then settle."""
        latest = await asyncio.to_thread(self.store.get, final.id)
        if latest is not None and latest.state in TERMINAL_STATES:
            final = latest
        else:
            await asyncio.to_thread(self.store.put, final)
            self._count(final.state)
        await self._finish(delivery, final)

    async def _finish(self, delivery: Delivery | None, record: JobRecord) -> None:
        """Announce a finished job (once: the record's `notified` marks it), then delete its message."""
        if not record.notified:
            await asyncio.to_thread(self.notifier.job_finished, record)
            await asyncio.to_thread(self.store.put, record.touch(notified=True))
        if delivery is not None:
            await asyncio.to_thread(self.queue.delete, delivery)

    async def _sweep_dead_letters(self) -> None:
        """Fail and announce the jobs whose messages the queue gave up on, every JOBS_POLL_S."""
        interval = max(self.settings.jobs_poll_s, MIN_SWEEP_INTERVAL_S)
        while not self._stopping:
            await asyncio.sleep(interval)
            if not self.generation.ready:
                continue
            try:
                for dead in await asyncio.to_thread(self.queue.dead_letters, DEAD_LETTERS_PER_SWEEP):
                    await self._settle_dead_letter(dead)
            except Exception as exc:  # it comes back on the next sweep
                log_failure(log, "settling dead-lettered jobs failed; retrying", exc)

    async def _settle_dead_letter(self, dead: Delivery) -> None:
        record = await asyncio.to_thread(self.store.get, dead.job_id)
        if record is not None and record.state not in TERMINAL_STATES:
            log.warning("a job was dead-lettered; failing it", extra={"job_id": record.id})
            reason = (
                f"the job queue gave up on it after {self.settings.jobs_queue_max_receives} deliveries "
                "(JOBS_QUEUE_MAX_RECEIVES)"
            )
            last = f"; the last attempt's error: {record.error}" if record.error else ""
            failed = record.touch(state=JobState.FAILED, error=reason + last, finished_at=time.time(), lease_until=None)
            await self._conclude(None, failed)
        elif record is not None:
            await self._finish(None, record)
        await asyncio.to_thread(self.queue.delete_dead_letter, dead)

    async def _hand_back(self, delivery: Delivery, record: JobRecord | None) -> None:
        """Make the job visible again now and store `record` (as it was before this attempt) as queued."""
        try:
            # Hidden until this process's last poll ends (at once if none is waiting), so that poll
            # cannot take the job again; then any worker may.
            await asyncio.to_thread(self.queue.extend, delivery, self._poll.hidden_s())
            if record is not None:
                await asyncio.to_thread(self.store.put, record.touch(state=JobState.QUEUED, lease_until=None))
        except Exception as exc:
            log_failure(log, "handing a job back failed; it returns after its visibility timeout", exc)
        log.info("job handed back", extra={"job_id": delivery.job_id})

    def _count(self, state: JobState) -> None:
        if self._on_finished is not None:
            self._on_finished(state)

    async def drain(self, grace_s: float | None) -> None:
        """Take no more jobs; let held ones finish within `grace_s`, then hand back the rest.

        Nothing waits for the receive loop's last long poll (up to JOBS_POLL_S): an idle worker is
        done at once, and jobs handed back stay hidden until that poll ends, so it cannot take them.
        """
        self._stopping = True
        if self._sweep_task is not None:
            self._sweep_task.cancel()
        hand_back_s = HAND_BACK_S if grace_s is None else min(HAND_BACK_S, grace_s / 4)
        held = list(self._held.values())
        if held:
            await asyncio.wait(held, timeout=None if grace_s is None else max(0.0, grace_s - hand_back_s))
        pending = [task for task in self._held.values() if not task.done()]
        for task in pending:
            task.cancel()  # each hands its job back
        if pending:
            await asyncio.wait(pending, timeout=hand_back_s)

    async def stop(self) -> None:
        """Stop at once: hand back whatever is held."""
        self._stopping = True
        if self._sweep_task is not None:
            self._sweep_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweep_task
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        held = list(self._held.values())
        for task in held:
            task.cancel()
        if held:
            await asyncio.wait(held, timeout=5)
