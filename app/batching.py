"""The batching queue: one bounded queue, one worker, compatible requests share a pipeline call.

Requests wait in a bounded deque. The worker takes the oldest live request and every queued one
with the same batch key (size, steps, guidance, LoRA adapters and scales) up to the batch limit, and runs
the batch in a thread so the event loop stays free. It waits up to BATCH_WAIT_MS for more company only while it is busy
serving several clients (its previous batch held more than one request): a request that reaches an
idle worker runs at once, so a lone client pays no batching delay. Requests whose client left or
whose deadline passed are dropped before they reach the pipeline, so they do not cost a batch slot,
and a pipeline call stops between denoising steps once no request of its batch waits any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL.Image import Image

from app.backends.base import Backend, GenerationParams

log = logging.getLogger(__name__)

# What batching may change in a request's image. The same seed and the same batch composition give
# the same bytes; the same request in another batch may differ by a rounding step here and there,
# because CPU (and GPU) kernels are not batch-invariant. Measured on the CPU: at most 1 on a few of the
# 0..255 channel values; the bound below leaves room for other kernels. Different prompts differ by
# a mean of several units, so the bound still tells a mixed-up batch apart.
ACROSS_BATCH_MAX_ABS = 2
"""Largest difference of one channel value (0..255) between the same request in two batch compositions."""
ACROSS_BATCH_MEAN_ABS = 0.1
"""Largest mean absolute difference (0..255 scale) between the same request in two batch compositions."""

StepListener = Callable[[int, int], None]
"""Called on the event loop after each denoising step with (steps done, total)."""

PipelineRunner = Callable[..., Awaitable[Any]]
"""Runs a blocking call off the event loop: `await runner(fn, *args)` returns `fn(*args)`."""


class QueueFull(Exception):
    """The queue holds QUEUE_SIZE requests already: answer 429."""


class DeadlineExceeded(Exception):
    """The request waited past REQUEST_TIMEOUT_S: answer 504."""


class ShutdownCut(Exception):
    """The shutdown grace ran out before this request's image was ready: answer 503 with an error id."""


class BatchAbandoned(Exception):
    """Raised from the step callback inside the pipeline call: no request of the batch waits any more."""


@dataclass(frozen=True)
class BatchResult:
    """One request's image and the size of the batch it ran in."""

    image: Image
    batch_size: int
    pipeline_ms: float = 0.0  # time inside the pipeline call that made it (the rest is the service's)


@dataclass
class _Job:
    params: GenerationParams
    future: asyncio.Future[BatchResult]
    on_step: StepListener | None = None

    @property
    def live(self) -> bool:
        return not self.future.done()


@dataclass
class BatcherStats:
    """What the batcher has seen, for /v1/info and the load test."""

    max_queue_depth: int = 0
    batch_sizes: Counter[int] = field(default_factory=Counter)
    dropped: int = 0  # requests that left (timeout or disconnect) before running
    abandoned_batches: int = 0  # pipeline calls stopped between steps because all their requests left
    last_batch_size: int = 0  # above 1: several clients are being served, so gathering pays off


class Batcher:
    """Owns the queue and the worker task; `submit` is the only way in."""

    def __init__(
        self,
        backend: Backend,
        max_batch_size: int,
        batch_wait_s: float,
        queue_size: int,
        on_batch: Callable[[int], None] | None = None,
        run_pipeline: PipelineRunner = asyncio.to_thread,
    ):
        self.backend = backend
        self._run_pipeline = run_pipeline
        self.max_batch_size = max(1, min(max_batch_size, backend.max_batch_size))
        self.batch_wait_s = batch_wait_s
        self.capacity = queue_size
        self.stats = BatcherStats()
        self._on_batch = on_batch
        self._queue: deque[_Job] = deque()
        self._arrived = asyncio.Event()
        self._in_hand = 0  # requests the worker has taken: gathering a batch or inside the pipeline call
        self._running: list[_Job] = []  # the batch inside the pipeline call, if any
        self._idle = asyncio.Event()
        self._idle.set()
        self._worker: asyncio.Task[None] | None = None

    @property
    def depth(self) -> int:
        """Requests waiting (not yet in a pipeline call)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Requests accepted and not yet answered: waiting, being gathered, or inside the pipeline."""
        return len(self._queue) + self._in_hand

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._worker = asyncio.create_task(self._work(), name="batch-worker")

    async def stop(self) -> None:
        """Stop the worker; requests still queued fail."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        for job in self._queue:
            if job.live:
                job.future.set_exception(RuntimeError("the service stopped before this request ran"))
        self._queue.clear()

    def cut(self) -> int:
        """Fail every unanswered request with ShutdownCut; the pipeline call stops after its current step."""
        jobs = [job for job in (*self._running, *self._queue) if job.live]
        for job in jobs:
            job.future.set_exception(ShutdownCut())
        self._queue.clear()
        return len(jobs)

    async def wait_idle(self) -> None:
        """Return once no request is queued or running."""
        while self._queue or self._in_hand:
            self._idle.clear()
            await self._idle.wait()

    async def submit(
        self, params: GenerationParams, timeout_s: float, on_step: StepListener | None = None
    ) -> BatchResult:
        """Queue one request and wait for its image; QueueFull or DeadlineExceeded otherwise."""
        return (await self.submit_many([params], timeout_s, on_step))[0]

    async def submit_many(
        self, group: Sequence[GenerationParams], timeout_s: float, on_step: StepListener | None = None
    ) -> list[BatchResult]:
        """Queue a group of requests at once (one client's n images) and wait for all their images, in order.

        They enter the queue together, so a group of one shape up to the batch limit runs as one pipeline
        call unless compatible requests queued earlier share it. All or nothing: QueueFull when the queue
        cannot take the whole group, DeadlineExceeded after `timeout_s`, and the first failure of any image
        fails the group (its other requests are withdrawn).
        """
        if len(self._queue) + len(group) > self.capacity:
            raise QueueFull
        loop = asyncio.get_running_loop()
        jobs = [_Job(params, loop.create_future(), on_step) for params in group]
        self._queue.extend(jobs)
        self._idle.clear()
        self.stats.max_queue_depth = max(self.stats.max_queue_depth, len(self._queue))
        self._arrived.set()
        try:
            # wait_for cancels the gathered futures on timeout or when our caller is cancelled (client gone).
            return list(await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), timeout_s))
        except TimeoutError:
            raise DeadlineExceeded from None
        finally:
            for job in jobs:
                if not job.future.done():  # a sibling failed: nobody waits for this one any more
                    job.future.cancel()
                if job.future.cancelled():
                    self._forget(job)

    def _forget(self, job: _Job) -> None:
        """Take a departed request out of the queue now, so it no longer counts against QUEUE_SIZE."""
        try:
            self._queue.remove(job)
        except ValueError:
            return  # the worker already took it; it skips departed requests itself
        self.stats.dropped += 1
        self._set_idle_if_empty()

    def _drop_departed(self) -> None:
        kept = [job for job in self._queue if job.live]
        self.stats.dropped += len(self._queue) - len(kept)
        if len(kept) != len(self._queue):
            self._queue = deque(kept)

    def _take_compatible(self, batch: list[_Job]) -> None:
        """Move queued jobs with the batch's key into `batch`, oldest first, up to the limit."""
        key = batch[0].params.batch_key
        remaining: deque[_Job] = deque()
        for job in self._queue:
            if not job.live:
                self.stats.dropped += 1
            elif len(batch) < self.max_batch_size and job.params.batch_key == key:
                batch.append(job)
            else:
                remaining.append(job)
        self._queue = remaining

    async def _next_batch(self) -> list[_Job]:
        while True:
            self._drop_departed()
            if self._queue:
                break
            self._set_idle_if_empty()
            self._arrived.clear()
            await self._arrived.wait()
        batch = [self._queue.popleft()]
        self._in_hand = 1
        loop = asyncio.get_running_loop()
        # An idle worker (its last batch ran alone) runs what is queued now; only a busy one waits.
        wait_s = self.batch_wait_s if self.stats.last_batch_size > 1 else 0.0
        gather_until = loop.time() + wait_s
        while True:
            self._arrived.clear()
            self._take_compatible(batch)
            self._in_hand = len(batch)
            left = gather_until - loop.time()
            if len(batch) >= self.max_batch_size or left <= 0:
                return batch
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    def _set_idle_if_empty(self) -> None:
        if not self._queue and not self._in_hand:
            self._idle.set()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            batch = [job for job in batch if job.live]  # some may have left while we gathered
            if not batch:
                self._in_hand = 0
                self._set_idle_if_empty()
                continue
            self.stats.batch_sizes[len(batch)] += 1
            self.stats.last_batch_size = len(batch)
            if self._on_batch is not None:
                self._on_batch(len(batch))

            def relay_step(done: int, total: int, jobs: list[_Job] = batch) -> None:
                # Runs in the pipeline thread after each denoising step: hand the step to the event loop,
                # or stop the call once every request of the batch is answered (timed out, client gone,
                # cut by the shutdown), so that the worker is free for the requests behind it.
                live = [job for job in jobs if job.live]
                if not live:
                    raise BatchAbandoned(f"stopped after step {done} of {total}")
                for job in live:
                    if job.on_step is not None:
                        loop.call_soon_threadsafe(job.on_step, done, total)

            self._running = batch
            try:
                images, pipeline_ms = await self._run_pipeline(_timed, self.backend.generate, batch, relay_step)
            except BatchAbandoned as stopped:
                self.stats.abandoned_batches += 1
                log.info("nobody waits for the batch any more; %s", stopped, extra={"batch_size": len(batch)})
            except Exception as exc:  # one bad batch must not stop the worker
                log.exception("pipeline call failed for a batch of %d", len(batch))
                for job in batch:
                    if job.live:
                        job.future.set_exception(exc)
            else:
                for job, image in zip(batch, images, strict=True):
                    if job.live:
                        job.future.set_result(BatchResult(image, len(batch), pipeline_ms))
            finally:
                self._running = []
                self._in_hand = 0
                self._set_idle_if_empty()


def _timed(generate: Callable[..., list[Image]], batch: list[_Job], on_step: StepListener) -> tuple[list[Image], float]:
    """Run the pipeline call (on the pipeline thread) and measure it there, without the thread hand-offs."""
    started = time.perf_counter()
    images = generate([job.params for job in batch], on_step)
    return images, (time.perf_counter() - started) * 1000.0
