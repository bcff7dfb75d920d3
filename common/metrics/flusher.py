"""The background task that drains a recorder every METRICS_FLUSH_S and publishes off-loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from common.metrics.publishers import CloudWatchPublisher, EmfPublisher, MetricsMode, Publisher
from common.metrics.recorder import MetricsRecorder

log = logging.getLogger(__name__)


def make_publisher(mode: MetricsMode) -> Publisher | None:
    """The publisher for a METRICS setting; None for "off"."""
    if mode == "emf":
        return EmfPublisher()
    if mode == "cloudwatch":
        return CloudWatchPublisher()
    return None


async def flush_once(recorder: MetricsRecorder, publisher: Publisher) -> None:
    """Publish what has been recorded, in a thread; a failure is logged, never raised."""
    batch = recorder.drain()
    if batch.empty:
        return
    try:
        await asyncio.to_thread(publisher.publish, batch)
    except Exception:  # metrics must never take the service down
        log.exception("publishing metrics failed; %d series dropped", len(batch.values))


async def run_flusher(
    recorder: MetricsRecorder, publisher: Publisher, interval_s: float, sample: Callable[[], Awaitable[None]]
) -> None:
    """Every `interval_s`, take the periodic samples (`sample` records them) and flush, until cancelled
    (then flush a last time). Sampling each interval makes an idle server report its gauges rather than
    nothing; a failed sample is logged and the flush goes on."""
    try:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await sample()
            except Exception:  # a gauge that cannot be read must not stop the counters
                log.exception("sampling metrics failed")
            await flush_once(recorder, publisher)
    finally:
        await asyncio.shield(flush_once(recorder, publisher))
