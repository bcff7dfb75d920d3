"""The background task that drains the aggregator every METRICS_FLUSH_S and publishes off-loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.metrics.aggregator import MetricsAggregator
from app.metrics.publishers import CloudWatchPublisher, EmfPublisher, Publisher
from app.settings import MetricsMode

log = logging.getLogger(__name__)


def make_publisher(mode: MetricsMode) -> Publisher | None:
    """The publisher for a METRICS setting; None for "off"."""
    if mode == "emf":
        return EmfPublisher()
    if mode == "cloudwatch":
        return CloudWatchPublisher()
    return None


async def flush_once(aggregator: MetricsAggregator, publisher: Publisher) -> None:
    """Publish what has been recorded, in a thread; a failure is logged, never raised."""
    batch = aggregator.drain()
    if batch.empty:
        return
    try:
        await asyncio.to_thread(publisher.publish, batch)
    except Exception:  # metrics must never take the service down
        log.exception("publishing metrics failed; %d series dropped", len(batch.values))


async def run_flusher(
    aggregator: MetricsAggregator, publisher: Publisher, interval_s: float, queue_depth: Callable[[], int]
) -> None:
    """Sample the queue depth and flush every `interval_s`, until cancelled (then flush a last time)."""
    try:
        while True:
            await asyncio.sleep(interval_s)
            aggregator.queue_sampled(queue_depth())
            await flush_once(aggregator, publisher)
    finally:
        await asyncio.shield(flush_once(aggregator, publisher))
