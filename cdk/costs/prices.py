"""The platform's price table: us-east-1 list prices of what a deploy keeps up, each with where it was read.

The accelerators' instance prices come from elsewhere, through the typed config: the instance each image pod and LLM
replica is pinned to (cdk/instance_types.py), or an explicit `costPricePerHour<Acc>` / `llmPricePerHour<Acc>`.
This table holds the rest. Sources are the stored pages the project's search tool
returned (third-party summaries of the AWS pricing pages unless an AWS page is named); check them against the AWS
pricing pages before relying on a figure, and update the line and its source together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

HOURS_PER_MONTH: Final = 730.0  # AWS's pricing pages' month
DAYS_PER_MONTH: Final = HOURS_PER_MONTH / 24


@dataclass(frozen=True)
class Price:
    """One list price and where it was read."""

    usd: float
    unit: str
    source: str


EKS_CLUSTER_HOUR: Final = Price(
    0.10,
    "per cluster-hour (standard support)",
    "aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing: 'you will continue "
    "to pay $0.10 per cluster per hour' in standard support",
)
NAT_GATEWAY_HOUR: Final = Price(
    0.045, "per NAT gateway-hour (plus $0.045/GB processed)", "handbook.getfinops.cloud/reduce-aws-nat-gateway-cost"
)
ALB_HOUR: Final = Price(
    0.0225, "per load balancer-hour (plus LCUs)", "docs/platform.md's at-rest table before this change; not re-read"
)
WAF_WEB_ACL_MONTH: Final = Price(5.0, "per web ACL-month", "docs/platform.md's at-rest table before this change")
WAF_RULE_MONTH: Final = Price(1.0, "per rule-month", "docs/platform.md's at-rest table before this change")
CLOUDWATCH_LOGS_INGEST_GB: Final = Price(
    0.50,
    "per GB ingested (standard class; vended logs such as flow logs cost the same for the first 10 TB)",
    "abd-ulbasit.github.io/bookstore-kubernetes-guide 14.05 ('$0.50/GB ingested plus $0.03/GB-month stored'); "
    "aws-samples sample-cfm-tips-mcp services/cloudwatch_service_vended_log.py (tier 1: standard $0.50/GB)",
)
CLOUDWATCH_LOGS_STORAGE_GB_MONTH: Final = Price(
    0.03, "per GB-month stored", "abd-ulbasit.github.io/bookstore-kubernetes-guide 14.05"
)
CLOUDWATCH_DASHBOARD_MONTH: Final = Price(
    3.0, "per dashboard-month", "factualminds.com/blog/amazon-cloudwatch-pricing-metrics-logs-alarms-dashboards"
)

# On-demand Linux prices of the system node types the docs name (`systemInstanceType`).
INSTANCE_HOUR: Final[dict[str, Price]] = {
    "t3.medium": Price(
        0.0416, "per instance-hour", "hacecuentas.com/en/costo-servidor-cloud-aws-ec2-mensual (reviewed April 2026)"
    ),
    "t3.large": Price(0.0832, "per instance-hour", "go-cloud.io/?p=10607 ('t3.large in us-east-1 costs $0.0832/hour')"),
    "m7i.large": Price(
        0.105,
        "per instance-hour, its 20 GiB gp3 disk included",
        "docs/platform.md's at-rest table before this change (2 x m7i.large with disks: about $0.21/h); not re-read",
    ),
}


def instance_hour(instance_type: str) -> Price:
    """The on-demand price of a system node type; a type the table lacks is named in the error."""
    try:
        return INSTANCE_HOUR[instance_type]
    except KeyError:
        raise KeyError(
            f"no price for systemInstanceType {instance_type!r} in cdk/costs/prices.py: add it with its source"
        ) from None
