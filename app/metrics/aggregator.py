"""Collects metric values between flushes; cheap enough to call on the request path."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from app import metric_names as m
from app.api.disconnect import CLIENT_CLOSED_REQUEST


@dataclass(frozen=True)
class MetricBatch:
    """Everything recorded since the last flush: metric name -> values, plus the dimensions."""

    dimensions: dict[str, str]
    values: dict[str, list[float]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing was recorded."""
        return not any(self.values.values())


class MetricsAggregator:
    """Counts and samples, swapped out atomically by `drain()` (single event loop, no locks needed)."""

    def __init__(self, deployment_unit: str, backend: str):
        self.dimensions = {
            m.DIMENSION_DEPLOYMENT_UNIT: deployment_unit,
            m.DIMENSION_ACCELERATOR: m.accelerator_dimension(backend),
        }
        self._values: defaultdict[str, list[float]] = defaultdict(list)

    def request_finished(self, status: int, latency_ms: float, images: int) -> None:
        """One generation request ended with HTTP `status` (5xx counts as an error).

        A request whose client left (499) counts as a request but not as an error, and its time is
        left out of the latency: it measures when the client gave up, not the service.
        """
        self._values[m.REQUESTS.name].append(1)
        self._values[m.ERRORS.name].append(1 if status >= 500 else 0)
        if status != CLIENT_CLOSED_REQUEST:
            self._values[m.LATENCY.name].append(latency_ms)
        if images:
            self._values[m.IMAGES_GENERATED.name].append(images)

    def batch_started(self, size: int, queue_depth: int) -> None:
        """The worker started a pipeline call of `size` requests with `queue_depth` still waiting."""
        self._values[m.BATCH_SIZE.name].append(size)
        self._values[m.QUEUE_DEPTH.name].append(queue_depth)

    def job_finished(self, *, succeeded: bool) -> None:
        """An asynchronous job reached `succeeded`, or `failed` after its last attempt."""
        spec = m.JOBS_SUCCEEDED if succeeded else m.JOBS_FAILED
        self._values[spec.name].append(1)

    def queue_sampled(self, depth: int) -> None:
        """A periodic queue depth sample, so an idle service reports 0 rather than nothing."""
        self._values[m.QUEUE_DEPTH.name].append(depth)

    def drain(self) -> MetricBatch:
        """Return what was recorded and start afresh."""
        values, self._values = dict(self._values), defaultdict(list)
        return MetricBatch(dict(self.dimensions), values)
