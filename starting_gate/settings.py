"""The gate's settings, from its environment."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class GateSettings:
    """Where requests go once a pod is ready, what to say until then, and whose demand to count."""

    upstream: str  # the serving pool's Service URL, e.g. http://sd-gpu.sd.svc:8000
    starting_minutes: int  # "starting, about N minutes": the time to the first image from cold
    retry_after_s: int  # Retry-After of the starting answer: how soon a client should try again
    # The metric dimensions of each pool the gate wakes ({"DeploymentUnit": ..., "Accelerator": ...}).
    demand_units: tuple[Mapping[str, str], ...]
    connect_timeout_s: float = 2.0  # a Service without ready endpoints refuses or times out the connection
    request_timeout_s: float = 300.0  # the upstream's own deadline is shorter (servingRequestTimeoutSeconds)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> GateSettings:
        """Read UPSTREAM_URL, STARTING_MINUTES, RETRY_AFTER_SECONDS and DEMAND_UNITS (a JSON list of dimension maps)."""
        units = json.loads(environ.get("DEMAND_UNITS", "[]"))
        if not isinstance(units, list) or not all(isinstance(u, dict) for u in units):
            raise ValueError("DEMAND_UNITS must be a JSON list of {dimension: value} objects")
        return cls(
            upstream=environ["UPSTREAM_URL"].rstrip("/"),
            starting_minutes=int(environ.get("STARTING_MINUTES", "10")),
            retry_after_s=int(environ.get("RETRY_AFTER_SECONDS", "30")),
            demand_units=tuple(units),
        )
