"""What a deploy costs per hour with no traffic: the README's trial figure and docs/platform.md's table.

Accelerated pods kept up at rest are priced from the config's own price settings (`costPricePerHour<Acc>`,
`llmPricePerHour<Acc>`: on-demand; Spot costs less); everything else from cdk/costs/prices.py.
"""

from __future__ import annotations

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


def cost_at_rest(config: AppConfig) -> CostAtRest:
    """Every item a deploy with `config` keeps up while no request arrives (us-east-1 list prices)."""
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
    serving = config.serving.per_accelerator
    for name, per in serving.items():
        if per.min_replicas:
            lines.append(
                CostLine(f"{per.min_replicas} x {name} image pod kept up", per.min_replicas * per.price_per_hour)
            )
    if config.llm is not None:
        for name, pool in config.llm.per_accelerator.items():
            if pool.min_replicas:
                lines.append(
                    CostLine(f"{pool.min_replicas} x {name} LLM pod kept up", pool.min_replicas * pool.price_per_hour)
                )
    logs = observability_usd_per_month(config.observability, config.flow_log_retention_days)
    lines.append(CostLine("CloudWatch logs and dashboard", logs / prices.HOURS_PER_MONTH))
    return CostAtRest(tuple(lines))
