"""What the platform logs: control-plane log types, VPC flow log traffic, Container Insights container logs.

These three are most of the observability bill at rest (docs/platform.md, "The observability bill"); each
is a setting so a deploy can trim it. The API server's api, audit and authenticator logs stay on whatever
is set: an incident review needs them, and the synth refuses a cluster without them (cdk/platform_checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdk.config.context import ConfigError, Context

# EKS control-plane log types as `AWS::EKS::Cluster` names them; aws_cdk's ClusterLoggingTypes carry the same.
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
REQUIRED_CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator")
FlowLogTraffic = Literal["ALL", "REJECT"]


@dataclass(frozen=True)
class ObservabilityConfig:
    """The logging settings of the platform stacks."""

    control_plane_log_types: tuple[str, ...]  # in CONTROL_PLANE_LOG_TYPES order
    flow_log_traffic: FlowLogTraffic  # ALL, or REJECT alone (a fraction of the records)
    container_logs: bool  # Container Insights ships every container's stdout/stderr to CloudWatch Logs

    @classmethod
    def from_context(cls, ctx: Context) -> ObservabilityConfig:
        """Read `controlPlaneLogTypes`, `flowLogTraffic` and `containerInsightsContainerLogs`."""
        types = ctx.string_list("controlPlaneLogTypes", allowed=CONTROL_PLANE_LOG_TYPES)
        missing = [t for t in REQUIRED_CONTROL_PLANE_LOG_TYPES if t not in types]
        if missing:
            raise ConfigError(
                f"setting 'controlPlaneLogTypes' = {types!r} is invalid: it must keep "
                + ", ".join(REQUIRED_CONTROL_PLANE_LOG_TYPES)
                + " (what an incident review needs); trim controllerManager and scheduler instead"
            )
        return cls(
            control_plane_log_types=tuple(t for t in CONTROL_PLANE_LOG_TYPES if t in types),
            flow_log_traffic=ctx.string("flowLogTraffic", allowed=("ALL", "REJECT")),
            container_logs=ctx.boolean("containerInsightsContainerLogs"),
        )
