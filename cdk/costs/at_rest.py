"""What a deploy costs per hour with no traffic: the README's trial figure and docs/platform.md's table.

The workloads price what they keep up at rest themselves (`Workload.kept_up`, from their own price settings:
on-demand; Spot costs less); the platform's items come from cdk/costs/prices.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cdk.config import AppConfig
from cdk.costs import prices
from cdk.costs.observability_bill import observability_usd_per_month

# The serving web ACL's rules: two managed rule groups, up to two rate rules and the allow-list (cdk/front_door/waf.py).
WAF_RULES = 4


@dataclass(frozen=True)
class CostLine:
    """One item kept up at rest."""

    item: str
    usd_per_hour: float


@dataclass(frozen=True)
class CostAtRest:
    """A deploy's cost per hour with no traffic, item by item."""

    lines: tuple[CostLine, ...]

    @property
    def usd_per_hour(self) -> float:
        """The total per hour."""
        return sum(line.usd_per_hour for line in self.lines)

    @property
    def usd_per_month(self) -> float:
        """The total per month (730 hours)."""
        return self.usd_per_hour * prices.HOURS_PER_MONTH


def cost_at_rest(config: AppConfig, kept_up: Iterable[tuple[str, float]]) -> CostAtRest:
    """Every item a deploy with `config` keeps up while no request arrives (us-east-1 list prices); `kept_up` is
    what its workloads keep running (`Workload.kept_up`)."""
    node = prices.instance_hour(config.system_instance_type)
    lines = [
        CostLine("EKS control plane", prices.EKS_CLUSTER_HOUR.usd),
        CostLine(
            f"{config.system_node_count} x {config.system_instance_type} system nodes",
            config.system_node_count * node.usd,
        ),
    ]
    if config.vpc_id is None:
        lines.append(CostLine(f"{config.max_azs} x NAT gateway", config.max_azs * prices.NAT_GATEWAY_HOUR.usd))
    lines.append(CostLine("ALB", prices.ALB_HOUR.usd))
    waf = prices.WAF_WEB_ACL_MONTH.usd + WAF_RULES * prices.WAF_RULE_MONTH.usd
    lines.append(CostLine("WAF web ACL and its rules", waf / prices.HOURS_PER_MONTH))
    lines.extend(CostLine(item, usd_per_hour) for item, usd_per_hour in kept_up)
    logs = observability_usd_per_month(config.observability, config.flow_log_retention_days)
    lines.append(CostLine("CloudWatch logs and dashboard", logs / prices.HOURS_PER_MONTH))
    return CostAtRest(tuple(lines))
