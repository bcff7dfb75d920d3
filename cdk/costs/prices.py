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
PUBLIC_IPV4_HOUR: Final = Price(
    0.005,
    "per public IPv4 address-hour, in use or idle (a NAT gateway's Elastic IP included), since 1 February 2024",
    "vishalvyas.com/understand-aws-public-ipv4-address-usage-and-pricing ('$0.005 per hour per IP'); "
    "techspace.co.th optimizing-public-ipv4-address-cost-in-aws (NAT gateways named); the AWS Networking blog, "
    "'Identify and optimize public IPv4 address usage on AWS'",
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

KMS_KEY_MONTH: Final = Price(
    1.0,
    "per customer managed key-month, prorated hourly; each yearly rotation's new backing key adds to it (AWS cut "
    "that charge in April 2024: the figure here is a key's first year); a key pending deletion costs nothing",
    "aws.amazon.com/kms/pricing ('Each AWS KMS key that you create in KMS costs $1/month'; 'There is no charge for "
    "customer managed KMS keys that are scheduled for deletion'); canglad.com simple-math-of-aws-kms-key-rotation-"
    "costs (the April 2024 reduction; its new figures are not in the stored corpus)",
)
# EBS volumes by CloudFormation's VolumeType, per GB-month of provisioned storage (gp3 with its free baseline of
# 3,000 IOPS and 125 MB/s, which the volumes here keep).
EBS_GB_MONTH: Final[dict[str, Price]] = {
    "gp2": Price(
        0.10,
        "per GB-month",
        "saisci.com/aws/gp2-vs-gp3-cost-comparison-ebs-volumes (from the EBS pricing page, "
        "N. Virginia: 'gp2 Volume Pricing $0.10 per GB-month of provisioned storage')",
    ),
    "gp3": Price(
        0.08,
        "per GB-month",
        "saisci.com/aws/gp2-vs-gp3-cost-comparison-ebs-volumes ('gp3 Storage Pricing $0.08/GB-month', N. Virginia)",
    ),
}
# What `cdk destroy` keeps (docs/platform.md, "What cdk destroy keeps"): the model store's weights and the buckets.
S3_STANDARD_GB_MONTH: Final = Price(
    0.023,
    "per GB-month (S3 Standard, first 50 TB)",
    "gist.github.com/EverettBerry ('First 50 TB / Month | $0.023 per GB'); not an AWS page",
)

# On-demand Linux prices of the system node types the docs name (`systemInstanceType`).
INSTANCE_HOUR: Final[dict[str, Price]] = {
    "t3.medium": Price(
        0.0416, "per instance-hour", "hacecuentas.com/en/costo-servidor-cloud-aws-ec2-mensual (reviewed April 2026)"
    ),
    "t3.large": Price(0.0832, "per instance-hour", "go-cloud.io/?p=10607 ('t3.large in us-east-1 costs $0.0832/hour')"),
    "m7i.large": Price(
        0.105,
        "per instance-hour (an upper bound: the figure once included a node's disk, which is now a line of its own)",
        "docs/platform.md's at-rest table before issue 38 (2 x m7i.large with disks: about $0.21/h); no price of "
        "m7i.large is in the stored corpus: verify on first deploy (docs/first-deploy.md)",
    ),
    # The kubectl tunnel (cdk/constructs/kubectl_tunnel.py INSTANCE_TYPE).
    "t4g.nano": Price(
        0.0046,
        "per instance-hour (region not stated by the source)",
        "github.com/Fred78290/autoscaled-masterkube-aws templates/machines/arm64.json ('t4g.nano': price 0.0046); "
        "no us-east-1 figure is in the stored corpus: verify on first deploy (docs/first-deploy.md)",
    ),
}


def ebs_gb_month(volume_type: str) -> Price:
    """The price of an EBS volume type (CloudFormation's VolumeType, e.g. gp3); a type the table lacks is named."""
    try:
        return EBS_GB_MONTH[volume_type]
    except KeyError:
        raise KeyError(
            f"no price for EBS volume type {volume_type!r} in cdk/costs/prices.py: add it with its source"
        ) from None


def instance_hour(instance_type: str) -> Price:
    """The on-demand price of an instance type the platform keeps up (system nodes, the tunnel); a type the table
    lacks is named in the error."""
    try:
        return INSTANCE_HOUR[instance_type]
    except KeyError:
        raise KeyError(
            f"no price for instance type {instance_type!r} (systemInstanceType or the kubectl tunnel's) in "
            "cdk/costs/prices.py: add it with its source"
        ) from None
