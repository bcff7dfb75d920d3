"""Demand seen while cold, published on the pools' own `Requests` metric so that their KEDA trigger (the
aws-cloudwatch one on `Requests`, cdk/image/scaling.py) sees it while no pod exists and scales from zero.

Only what a signed-in caller asks for images counts (the server checks the sign-in first): a generation, a job,
the UI's queue join, or a person opening the UI. A crawler's GET, a scan of the public URL or a health check from
elsewhere never starts a GPU node.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from common import metric_names
from common.image_api_paths import GENERATE_PATH, JOBS_PATH, OPENAI_IMAGES_PREFIX, UI_QUEUE_JOIN_PATH

_GENERATION_PATHS = frozenset({GENERATE_PATH, JOBS_PATH, UI_QUEUE_JOIN_PATH})


def asks_for_images(method: str, path: str, page_load: bool) -> bool:
    """Whether a request would have the pool make images: a POST to a generation route (the OpenAI Images routes
    included), or a person opening the UI (a page load, whose next step is the queue join)."""
    if method == "POST":
        return path in _GENERATION_PATHS or path.startswith(OPENAI_IMAGES_PREFIX)
    return page_load


class CloudWatchClient(Protocol):
    """The one call of boto3's CloudWatch client the publisher makes."""

    def put_metric_data(self, **kwargs: Any) -> Any: ...


class DemandCounter:
    """Requests answered "starting" since the last flush (thread-safe: the server counts, a timer flushes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self.total = 0  # since start, for the gate's own status

    def add(self) -> None:
        """Count one signed-in request for images that found no ready pod."""
        with self._lock:
            self._count += 1
            self.total += 1

    def take(self) -> int:
        """The count since the last take, reset to 0."""
        with self._lock:
            count, self._count = self._count, 0
            return count


def flush(counter: DemandCounter, client: CloudWatchClient, units: Sequence[Mapping[str, str]]) -> int:
    """Publish the waiting count as `Requests` of every pool the gate wakes; returns the count published."""
    count = counter.take()
    if count == 0 or not units:
        return count
    data = [
        {
            "MetricName": metric_names.REQUESTS.name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in unit.items()],
            "Value": float(count),
            "Unit": metric_names.REQUESTS.unit,
        }
        for unit in units
    ]
    client.put_metric_data(Namespace=metric_names.NAMESPACE, MetricData=data)
    return count


class Flusher:
    """Flushes a counter every `period_s` on a daemon thread, off the request path."""

    def __init__(
        self, counter: DemandCounter, client: CloudWatchClient, units: Sequence[Mapping[str, str]], period_s: float
    ) -> None:
        self._args = (counter, client, units)
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demand-flusher")

    def start(self) -> None:
        """Start flushing."""
        self._thread.start()

    def stop(self) -> None:
        """Flush what is left and stop."""
        self._stop.set()
        self._thread.join(timeout=10)
        flush(*self._args)

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            flush(*self._args)
