"""The generation service: loads the backend, owns the batcher and metrics, and serves requests.

The HTTP API and the Gradio UI both call `GenerationService.generate`, so they share one queue,
one capacity bound and one set of metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.backends.base import Backend, GenerationParams
from app.batching import Batcher, BatchResult, StepListener
from app.loras import AdapterFile, find_adapters, local_lora_dir
from app.metrics.aggregator import MetricsAggregator
from app.model_store.source import declared_family, fetch_adapters, public_model_name
from app.models.builtin import BUILTIN_PREFIX
from app.models.families import Family, SizeBounds
from app.settings import Settings
from common.http.disconnect import CLIENT_CLOSED_REQUEST
from common.logs import log_failure
from common.metrics.flusher import make_publisher, run_flusher
from common.version import VERSION

log = logging.getLogger(__name__)

BackendLoader = Callable[[Settings], Backend]
DrainHook = Callable[[float | None], Awaitable[None]]


class NotReady(Exception):
    """The model is still loading or warming up, or the service is shutting down: answer 503."""


class GenerationService:
    """Everything behind the routes: readiness, the loaded backend, the batcher and the metrics."""

    def __init__(self, settings: Settings, load_backend: BackendLoader):
        self.settings = settings
        self._load_backend = load_backend
        self.backend: Backend | None = None
        self.batcher: Batcher | None = None
        self.metrics: MetricsAggregator | None = None
        self.ready = False
        self.draining = False
        self.load_error: str | None = None  # for operators and the benchmark; never in a response
        self.load_error_id: str | None = None
        self.cancelled = 0  # requests whose client left before the answer (API and UI)
        self._tasks: list[asyncio.Task[None]] = []
        self._drain_hooks: list[DrainHook] = []
        # One thread runs every pipeline call (load, warm-up, batches): compiled CUDA graphs are
        # recorded per thread, so warm-up on another thread than serving would be wasted.
        self._pipeline_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline")

    async def _on_pipeline_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking call on the pipeline thread without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pipeline_thread, fn, *args)

    def run_blocking_on_pipeline_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the pipeline thread and wait for it (for benchmarks: the bare call
        measured on the very thread that serves the batches)."""
        return self._pipeline_thread.submit(fn, *args).result()

    @property
    def model_name(self) -> str:
        """The model's name in the API: MODEL_NAME, else what responses may say about MODEL_ID."""
        return self.settings.model_name or public_model_name(self.settings.model_id)

    @property
    def demo_model(self) -> bool:
        """True for the built-in random-weight model (its images are abstract)."""
        return self.settings.model_id.startswith(BUILTIN_PREFIX)

    @property
    def family(self) -> Family:
        """The loaded model's family; before it loads, the one its source declares (SD when unknown yet)."""
        if self.backend is not None:
            return self.backend.family
        return declared_family(self.settings.model_id)

    @property
    def lora_folder(self) -> Path | None:
        """The local folder of LORA_DIR's adapters (an s3:// LORA_DIR's mirror), None without adapters."""
        return local_lora_dir(self.settings.lora_dir, self.settings.model_cache_dir)

    def adapters(self) -> dict[str, AdapterFile]:
        """The adapters a request may name, read from the folder each time (a file added while running counts)."""
        return find_adapters(self.lora_folder)

    @property
    def default_size(self) -> tuple[int, int]:
        """(width, height) for a request that names none: the settings, else the model's native size."""
        native = self.backend.native_size if self.backend else self.family.default_size
        return (self.settings.default_width or native[0], self.settings.default_height or native[1])

    @property
    def default_steps(self) -> int:
        """Steps for a request that names none: DEFAULT_STEPS, else the family's default capped at MAX_STEPS."""
        return self.settings.default_steps or min(self.family.default_steps, self.settings.max_steps)

    @property
    def default_guidance_scale(self) -> float | None:
        """Guidance for a request that names none: None for a guidance-distilled family, else the
        DEFAULT_GUIDANCE_SCALE setting or the family's default."""
        family = self.family
        if not family.guidance:
            return None
        configured = self.settings.default_guidance_scale
        return family.default_guidance if configured is None else configured

    @property
    def size_bounds(self) -> SizeBounds:
        """The sides a request may ask for: the family's bounds at the model's scale, within MIN_SIZE..MAX_SIZE."""
        settings = self.settings
        bounds = self.backend.bounds if self.backend is not None else self.family.bounds
        return bounds.within(settings.min_size, settings.max_size)

    @property
    def sizes(self) -> tuple[tuple[int, int], ...]:
        """The family's native sizes for this model that the bounds admit: the UI's presets."""
        sizes = self.backend.sizes if self.backend is not None else self.family.sizes_at(self.family.reference_side)
        bounds = self.size_bounds
        return tuple(size for size in sizes if not bounds.problems(*size, self.family.title))

    async def start(self) -> None:
        """Load the model and warm it up in a thread, then start the batcher and mark ready."""
        settings = self.settings
        started = time.perf_counter()
        try:
            if settings.lora_dir is not None and settings.lora_dir.startswith("s3://"):
                await self._on_pipeline_thread(fetch_adapters, settings.lora_dir, self.lora_folder)
            backend = await self._on_pipeline_thread(self._load_backend, settings)
            log.info("model loaded", extra={"backend": backend.name, "model": settings.model_id})
            self.backend = backend
            await self._on_pipeline_thread(backend.warm_up, min(self.default_steps, 4), self.default_size)
        except Exception as exc:
            self.backend = None
            self.load_error = f"{type(exc).__name__}: {exc}"
            # Responses carry only this id; the exception (paths, bucket names) stays in the log line.
            self.load_error_id = log_failure(log, "loading the model failed; readiness stays 503", exc)
            return
        self.metrics = MetricsAggregator(settings.deployment_unit, backend.name)
        self.batcher = Batcher(
            backend,
            max_batch_size=settings.max_batch_size,
            batch_wait_s=settings.batch_wait_ms / 1000.0,
            queue_size=settings.queue_size,
            on_batch=self._batch_started,
            run_pipeline=self._on_pipeline_thread,
        )
        self.batcher.start()
        publisher = make_publisher(settings.metrics)
        if publisher is not None:
            flusher = run_flusher(self.metrics, publisher, settings.metrics_flush_s, self._sample_queue)
            self._tasks.append(asyncio.create_task(flusher, name="metrics-flusher"))
        self.ready = True
        log.info("ready", extra={"backend": backend.name, "load_s": round(time.perf_counter() - started, 2)})

    async def _sample_queue(self) -> None:
        if self.metrics is not None and self.batcher is not None:
            self.metrics.queue_sampled(self.batcher.depth)

    def _batch_started(self, size: int) -> None:
        if self.metrics is not None and self.batcher is not None:
            self.metrics.batch_started(size, self.batcher.depth)

    def add_drain_hook(self, hook: DrainHook) -> None:
        """Also run `hook(grace_s)` on drain, beside the batcher's wait (the job worker uses it)."""
        self._drain_hooks.append(hook)

    async def drain(self, grace_s: float | None) -> None:
        """Refuse new work (readiness 503) and give in-flight requests up to `grace_s` (None: no limit)."""
        self.draining = True
        self.ready = False
        log.info("draining", extra={"in_flight": self.batcher.in_flight if self.batcher else 0})
        hooks = [asyncio.create_task(hook(grace_s)) for hook in self._drain_hooks]
        if self.batcher is not None:
            try:
                await asyncio.wait_for(self.batcher.wait_idle(), grace_s)
            except TimeoutError:
                cut = self.batcher.cut()
                log.warning("grace period over; unanswered requests get a 503", extra={"cut": cut})
        if hooks:
            await asyncio.gather(*hooks, return_exceptions=True)

    async def stop(self) -> None:
        """Stop the worker and the metrics flusher (which flushes one last time)."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.batcher is not None:
            await self.batcher.stop()
        self._pipeline_thread.shutdown(wait=False, cancel_futures=True)

    async def generate(
        self, params: GenerationParams, on_step: StepListener | None = None, timeout_s: float | None = None
    ) -> BatchResult:
        """Queue `params` and wait for the image within `timeout_s` (default REQUEST_TIMEOUT_S); raises
        NotReady, QueueFull or DeadlineExceeded."""
        return (await self.generate_many([params], on_step, timeout_s))[0]

    async def generate_many(
        self, group: Sequence[GenerationParams], on_step: StepListener | None = None, timeout_s: float | None = None
    ) -> list[BatchResult]:
        """Queue one client's images together (Batcher.submit_many) and wait for them all, in order; raises
        NotReady, QueueFull or DeadlineExceeded."""
        if self.draining:
            raise NotReady("the service is shutting down")
        if self.load_error_id is not None:
            raise NotReady(f"the model failed to load (error id {self.load_error_id}); this replica cannot serve")
        if not self.ready or self.batcher is None:
            raise NotReady("the model is still loading")
        timeout = self.settings.request_timeout_s if timeout_s is None else timeout_s
        return await self.batcher.submit_many(group, timeout, on_step)

    def record(self, status: int, latency_ms: float, images: int) -> None:
        """Count one finished generation request (API or UI) in the metrics (499: the client left)."""
        if status == CLIENT_CLOSED_REQUEST:
            self.cancelled += 1
        if self.metrics is not None:
            self.metrics.request_finished(status, latency_ms, images)

    def describe_family(self) -> dict[str, Any]:
        """What /v1/info says about the model's family: sizes, defaults, bounds, the controls that apply."""
        family = self.family
        bounds = self.size_bounds
        return {
            "name": family.name,
            "title": family.title,
            "sizes": [{"width": w, "height": h} for w, h in self.sizes],
            "default_steps": self.default_steps,
            "default_guidance_scale": self.default_guidance_scale,
            "guidance": family.guidance,
            "negative_prompt": family.negative_prompt,
            "size_bounds": {"min": bounds.min_side, "max": bounds.max_side, "multiple_of": bounds.multiple_of},
        }

    def info(self) -> dict[str, Any]:
        """The body of GET /v1/info."""
        settings = self.settings
        backend = self.backend
        batcher = self.batcher
        return {
            "version": VERSION,
            "ready": self.ready,
            "backend": backend.name if backend else None,
            "model": self.model_name,
            "demo_model": self.demo_model,
            **(backend.describe() if backend else {}),
            "load_error_id": self.load_error_id,
            "family": self.describe_family(),
            "limits": {
                "max_prompt_chars": settings.max_prompt_chars,
                "max_steps": settings.max_steps,
                "max_guidance_scale": settings.max_guidance_scale,
                "min_size": settings.min_size,
                "max_size": settings.max_size,
            },
            "batching": {
                "max_batch_size": batcher.max_batch_size if batcher else settings.max_batch_size,
                "batch_wait_ms": settings.batch_wait_ms,
                "queue_size": settings.queue_size,
                "queue_depth": batcher.depth if batcher else 0,
                "max_queue_depth_seen": batcher.stats.max_queue_depth if batcher else 0,
                "batches_by_size": {str(k): v for k, v in sorted(batcher.stats.batch_sizes.items())} if batcher else {},
                "dropped_before_running": batcher.stats.dropped if batcher else 0,
                "batches_stopped_unanswered": batcher.stats.abandoned_batches if batcher else 0,
                "cancelled_by_client": self.cancelled,
            },
            "deployment_unit": settings.deployment_unit,
        }
