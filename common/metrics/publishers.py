"""Where aggregated metrics go: CloudWatch EMF lines on stdout, or PutMetricData calls.

Both keep every latency value (not only an average), so CloudWatch can compute p50/p90/p99.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any, Literal, Protocol, TextIO

from common import metric_names as m
from common.metrics.recorder import MetricBatch

MetricsMode = Literal["off", "emf", "cloudwatch"]
"""The METRICS setting of the image service and the LLM gateway."""

_UNITS = {spec.name: spec.unit for spec in (*m.ALL_METRICS, *m.LLM_METRICS)}
_EMF_MAX_VALUES = 100  # EMF accepts up to 100 values per metric per line
_PUT_MAX_VALUES = 150  # PutMetricData accepts up to 150 distinct values per datum
_PUT_MAX_DATA = 1000  # and up to 1000 data per call


class Publisher(Protocol):
    """Sends one MetricBatch somewhere; called from a background thread."""

    def publish(self, batch: MetricBatch) -> None:
        """Send the batch; may block on I/O."""
        ...


def _series(batch: MetricBatch) -> dict[str, list[float]]:
    """Counters become one summed value; samples keep every value."""
    return {
        name: ([float(sum(values))] if name in m.COUNTERS else [float(v) for v in values])
        for name, values in batch.values.items()
        if values
    }


class EmfPublisher:
    """CloudWatch Embedded Metric Format: one JSON line per flush, picked up by the log agent."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream

    def publish(self, batch: MetricBatch) -> None:
        """Write the batch as EMF lines (split when a metric has more than 100 values)."""
        stream = self._stream or sys.stdout
        series = _series(batch)
        while series:
            chunk = {name: values[:_EMF_MAX_VALUES] for name, values in series.items()}
            series = {name: values[_EMF_MAX_VALUES:] for name, values in series.items() if values[_EMF_MAX_VALUES:]}
            line: dict[str, Any] = {
                "_aws": {
                    "Timestamp": int(time.time() * 1000),
                    "CloudWatchMetrics": [
                        {
                            "Namespace": m.NAMESPACE,
                            "Dimensions": [list(batch.dimensions)],
                            "Metrics": [{"Name": name, "Unit": _UNITS[name]} for name in chunk],
                        }
                    ],
                },
                **batch.dimensions,
                **{name: values if len(values) > 1 else values[0] for name, values in chunk.items()},
            }
            stream.write(json.dumps(line) + "\n")
        stream.flush()


class CloudWatchPublisher:
    """Batched PutMetricData with value/count pairs (the workload identity supplies credentials)."""

    def __init__(self, client: Any = None):
        if client is None:
            import boto3

            client = boto3.client("cloudwatch")
        self._client = client

    def publish(self, batch: MetricBatch) -> None:
        """One datum per metric (more when a metric has over 150 distinct values)."""
        dimensions = [{"Name": k, "Value": v} for k, v in batch.dimensions.items()]
        data: list[dict[str, Any]] = []
        for name, values in _series(batch).items():
            counts = sorted(Counter(values).items())
            for start in range(0, len(counts), _PUT_MAX_VALUES):
                chunk = counts[start : start + _PUT_MAX_VALUES]
                data.append(
                    {
                        "MetricName": name,
                        "Dimensions": dimensions,
                        "Unit": _UNITS[name],
                        "Values": [v for v, _ in chunk],
                        "Counts": [float(c) for _, c in chunk],
                    }
                )
        for start in range(0, len(data), _PUT_MAX_DATA):
            self._client.put_metric_data(Namespace=m.NAMESPACE, MetricData=data[start : start + _PUT_MAX_DATA])
