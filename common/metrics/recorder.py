"""Collects metric values between flushes; cheap enough to call on the request path.

Shared by the image service (app.metrics.aggregator) and the LLM gateway (llm_gateway.metrics_bridge),
so it imports nothing of either.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from common import metric_names as m


@dataclass(frozen=True)
class MetricBatch:
    """Everything recorded since the last flush: metric name -> values, plus the dimensions."""

    dimensions: dict[str, str]
    values: dict[str, list[float]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing was recorded."""
        return not any(self.values.values())


class MetricsRecorder:
    """Values per metric, swapped out atomically by `drain()` (single event loop, no locks needed)."""

    def __init__(self, deployment_unit: str, accelerator: str) -> None:
        if accelerator not in m.ACCELERATORS:
            raise ValueError(f"accelerator must be one of {', '.join(m.ACCELERATORS)}, not {accelerator!r}")
        self.dimensions = {m.DIMENSION_DEPLOYMENT_UNIT: deployment_unit, m.DIMENSION_ACCELERATOR: accelerator}
        self._values: defaultdict[str, list[float]] = defaultdict(list)

    def record(self, spec: m.MetricSpec, value: float) -> None:
        """One value of `spec` (a counter's increment, or a sample)."""
        self._values[spec.name].append(value)

    def drain(self) -> MetricBatch:
        """Return what was recorded and start afresh."""
        values, self._values = dict(self._values), defaultdict(list)
        return MetricBatch(dict(self.dimensions), values)
