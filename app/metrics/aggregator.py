"""The image service's metrics: what one generation request, batch or job adds to the recorder."""

from __future__ import annotations

from common import metric_names as m
from common.http.disconnect import CLIENT_CLOSED_REQUEST
from common.metrics.recorder import MetricsRecorder


class MetricsAggregator(MetricsRecorder):
    """The recorder of one image service, whose `Accelerator` dimension follows from its BACKEND."""

    def __init__(self, deployment_unit: str, backend: str) -> None:
        super().__init__(deployment_unit, m.accelerator_dimension(backend))

    def request_finished(self, status: int, latency_ms: float, images: int) -> None:
        """One generation request ended with HTTP `status` (5xx counts as an error).

        A request whose client left (499) counts as a request but not as an error, and its time is
        left out of the latency: it measures when the client gave up, not the service.
        """
        self.record(m.REQUESTS, 1)
        self.record(m.ERRORS, 1 if status >= 500 else 0)
        if status != CLIENT_CLOSED_REQUEST:
            self.record(m.LATENCY, latency_ms)
        if images:
            self.record(m.IMAGES_GENERATED, images)

    def batch_started(self, size: int, queue_depth: int) -> None:
        """The worker started a pipeline call of `size` requests with `queue_depth` still waiting."""
        self.record(m.BATCH_SIZE, size)
        self.record(m.QUEUE_DEPTH, queue_depth)

    def job_finished(self, *, succeeded: bool) -> None:
        """An asynchronous job reached `succeeded`, or `failed` after its last attempt."""
        self.record(m.JOBS_SUCCEEDED if succeeded else m.JOBS_FAILED, 1)

    def queue_sampled(self, depth: int) -> None:
        """A periodic queue depth sample, so an idle service reports 0 rather than nothing."""
        self.record(m.QUEUE_DEPTH, depth)
