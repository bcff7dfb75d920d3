"""The observability bill: each log source's volume per day at a deploy's settings, and what it costs.

Volumes at rest (no traffic) are estimates; each says where it comes from. The first-deploy checklist measures
the real ones (docs/first-deploy.md, "Observability bill"). Metrics priced per metric, alarm or Container Insights
observation are not in this figure: their prices are not in the stored corpus (docs/platform.md says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk.config.existing_cluster import ExistingClusterConfig
from cdk.config.observability import CONTROL_PLANE_LOG_TYPES, ObservabilityConfig
from cdk.costs import prices

# Control-plane logs, all five types: "On a quiet day this generates a few hundred megabytes"
# (abd-ulbasit.github.io/bookstore-kubernetes-guide 14.05, of a cluster with all five streams on).
CONTROL_PLANE_GB_PER_DAY = 0.3
# VPC flow logs: ~10 network interfaces at rest (2 system nodes with 2 each, 2 NAT gateways, the ALB's 2, an
# interface or two more), ~50 flows each per 10-minute aggregation window (kubelet, API server, DNS, agents), ~100
# bytes per default-format record: our estimate. REJECT alone keeps about a tenth (our estimate: at rest, scans of
# the public addresses are what is rejected).
FLOW_LOG_RECORDS_PER_DAY = 10 * 50 * 144
FLOW_LOG_RECORD_BYTES = 100
FLOW_LOG_REJECT_SHARE = 0.1
# Container Insights performance log events (embedded metric format, one per node, pod and container each minute):
# ~60 objects at rest (2 nodes, ~25 system pods and their containers), ~1 KB per event: our estimate.
PERFORMANCE_EVENTS_PER_DAY = 60 * 1440
PERFORMANCE_EVENT_BYTES = 1000
# Container logs (Fluent Bit): ~25 system pods at about one 300-byte line every 10 seconds: our estimate. AL2023
# nodes vend no dataplane/host logs by default (docs.aws.amazon.com/AmazonCloudWatch, "Setting up Container
# Insights on Amazon EKS and Kubernetes").
CONTAINER_LOG_LINES_PER_DAY = 25 * 8640
CONTAINER_LOG_LINE_BYTES = 300
GB = 1e9


@dataclass(frozen=True)
class LogSource:
    """One source of CloudWatch Logs ingestion."""

    name: str
    gb_per_day: float
    basis: str  # where the volume comes from

    def usd_per_month(self, retention_days: int) -> float:
        """Ingestion plus storage over the retention period (a steady state)."""
        ingest = self.gb_per_day * prices.DAYS_PER_MONTH * prices.CLOUDWATCH_LOGS_INGEST_GB.usd
        stored = self.gb_per_day * retention_days * prices.CLOUDWATCH_LOGS_STORAGE_GB_MONTH.usd
        return ingest + stored


def log_sources(cfg: ObservabilityConfig, existing: ExistingClusterConfig | None = None) -> list[LogSource]:
    """The log sources a deploy with `cfg` ingests at rest. On a team's cluster (`existing`) the control plane's
    and the VPC's logs are the team's, and Container Insights is ours only where we install its agent."""
    sources = _own_cluster_sources(cfg) if existing is None else []
    if existing is None or existing.installs("cloudwatch-agent"):
        sources += _container_insights_sources(cfg)
    return sources


def _own_cluster_sources(cfg: ObservabilityConfig) -> list[LogSource]:
    """The control plane's and the VPC's logs, of a cluster and network of our own."""
    flow_records = FLOW_LOG_RECORDS_PER_DAY * (1.0 if cfg.flow_log_traffic == "ALL" else FLOW_LOG_REJECT_SHARE)
    return [
        LogSource(
            "EKS control plane (" + ", ".join(cfg.control_plane_log_types) + ")",
            CONTROL_PLANE_GB_PER_DAY,
            "a quiet cluster with all five types: a few hundred MB a day; the split by type is not documented, so "
            "fewer types are counted at the same figure (an upper bound)"
            if len(cfg.control_plane_log_types) < len(CONTROL_PLANE_LOG_TYPES)
            else "a quiet cluster with all five types: a few hundred MB a day",
        ),
        LogSource(
            f"VPC flow logs ({cfg.flow_log_traffic})",
            flow_records * FLOW_LOG_RECORD_BYTES / GB,
            f"{flow_records:,.0f} records of ~{FLOW_LOG_RECORD_BYTES} B a day",
        ),
    ]


def _container_insights_sources(cfg: ObservabilityConfig) -> list[LogSource]:
    """The CloudWatch agent's performance events and, when on, Fluent Bit's container logs."""
    sources = [
        LogSource(
            "Container Insights performance events",
            PERFORMANCE_EVENTS_PER_DAY * PERFORMANCE_EVENT_BYTES / GB,
            f"{PERFORMANCE_EVENTS_PER_DAY:,} events of ~{PERFORMANCE_EVENT_BYTES} B a day",
        ),
    ]
    if cfg.container_logs:
        sources.append(
            LogSource(
                "container logs (Fluent Bit)",
                CONTAINER_LOG_LINES_PER_DAY * CONTAINER_LOG_LINE_BYTES / GB,
                f"{CONTAINER_LOG_LINES_PER_DAY:,} lines of ~{CONTAINER_LOG_LINE_BYTES} B a day",
            )
        )
    return sources


def observability_usd_per_month(
    cfg: ObservabilityConfig, retention_days: int, existing: ExistingClusterConfig | None = None
) -> float:
    """Logs (ingestion and storage) plus the serving dashboard, per month."""
    logs = sum(s.usd_per_month(retention_days) for s in log_sources(cfg, existing))
    return logs + prices.CLOUDWATCH_DASHBOARD_MONTH.usd
