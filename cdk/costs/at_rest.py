"""What a deploy costs per hour with no traffic: the README's trial figure and docs/platform.md's table.

The workloads price what they keep up at rest themselves (`Workload.kept_up`, from their own price settings:
on-demand; Spot costs less); the platform's items come from cdk/costs/prices.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cdk.config import AppConfig
from cdk.constructs import kubectl_tunnel
from cdk.costs import prices
from cdk.costs.kms_keys import customer_managed_keys
from cdk.costs.observability_bill import observability_usd_per_month
from cdk.front_door.waf import rule_count as waf_rule_count

# The system node group sets no disk and no launch template (cdk/constructs/cluster.py), so EKS's defaults apply:
# "The default disk size is 20 GiB for Linux" (EKS CreateNodegroup diskSize; aws_eks_v2.NodegroupOptions.disk_size
# in aws-cdk-lib 2.275.0), and a gp2 volume: "by default, only volumes with gp2 volume type are provisioned for
# Managed worker nodes" (aws/containers-roadmap#1417, open), confirmed for 2026 by AWS support in
# bottlerocket-os/bottlerocket#4799. docs/first-deploy.md checks both on the first deploy.
SYSTEM_NODE_DISK_GIB = 20
SYSTEM_NODE_DISK_TYPE = "gp2"


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
    # On a team's cluster (existingClusterName) its control plane, nodes, NAT gateways and access are the team's.
    lines = _own_cluster_lines(config) if config.existing_cluster is None else []
    lines.append(CostLine("ALB", prices.ALB_HOUR.usd))
    waf = prices.WAF_WEB_ACL_MONTH.usd + waf_rule_count(config.serving) * prices.WAF_RULE_MONTH.usd
    lines.append(CostLine("WAF web ACL and its rules", waf / prices.HOURS_PER_MONTH))
    lines.extend(CostLine(item, usd_per_hour) for item, usd_per_hour in kept_up)
    keys = len(customer_managed_keys(config))
    lines.append(
        CostLine(f"{keys} x KMS customer managed key", keys * prices.KMS_KEY_MONTH.usd / prices.HOURS_PER_MONTH)
    )
    logs = observability_usd_per_month(config.observability, config.flow_log_retention_days, config.existing_cluster)
    lines.append(CostLine("CloudWatch logs and dashboard", logs / prices.HOURS_PER_MONTH))
    return CostAtRest(tuple(lines))


def _own_cluster_lines(config: AppConfig) -> list[CostLine]:
    """What a cluster of our own keeps up: control plane, system nodes and their disks, NAT, the tunnel."""
    nodes = config.system_node_count
    lines = [
        CostLine("EKS control plane", prices.EKS_CLUSTER_HOUR.usd),
        CostLine(
            f"{nodes} x {config.system_instance_type} system nodes",
            nodes * prices.instance_hour(config.system_instance_type).usd,
        ),
        CostLine(
            f"{nodes} x {SYSTEM_NODE_DISK_GIB} GiB {SYSTEM_NODE_DISK_TYPE} system node disks",
            nodes * _disk_hour(SYSTEM_NODE_DISK_TYPE, SYSTEM_NODE_DISK_GIB),
        ),
    ]
    if config.vpc_id is None:
        # One NAT gateway per AZ (cdk/constructs/network.py), each with an Elastic IP: a public IPv4 address.
        lines.append(CostLine(f"{config.max_azs} x NAT gateway", config.max_azs * prices.NAT_GATEWAY_HOUR.usd))
        lines.append(
            CostLine(
                f"{config.max_azs} x public IPv4 address (the NAT gateways')",
                config.max_azs * prices.PUBLIC_IPV4_HOUR.usd,
            )
        )
    if config.access.kubectl_tunnel:
        lines.append(_kubectl_tunnel_line())
    return lines


def _disk_hour(volume_type: str, gib: int) -> float:
    """An EBS volume's price per hour."""
    return gib * prices.ebs_gb_month(volume_type).usd / prices.HOURS_PER_MONTH


def _kubectl_tunnel_line() -> CostLine:
    """The tunnel instance and its root volume (cdk/constructs/kubectl_tunnel.py)."""
    # The construct holds the CDK enum, whose name is CloudFormation's VolumeType in upper case.
    volume_type = kubectl_tunnel.ROOT_VOLUME_TYPE.value.lower()
    gib = kubectl_tunnel.ROOT_VOLUME_GIB
    return CostLine(
        f"kubectl tunnel: 1 x {kubectl_tunnel.INSTANCE_TYPE} and its {gib} GiB {volume_type} disk",
        prices.instance_hour(kubectl_tunnel.INSTANCE_TYPE).usd + _disk_hour(volume_type, gib),
    )


def markdown_table(cost: CostAtRest) -> str:
    """The items and the total as the markdown table the docs quote (`python -m cdk.costs` prints it)."""
    rows = [f"| {line.item} | ${line.usd_per_hour:.3f} |" for line in cost.lines]
    total = f"| **total** | **${cost.usd_per_hour:.2f} an hour (${cost.usd_per_month:,.0f} a month)** |"
    return "\n".join(["| item | per hour |", "| --- | --- |", *rows, total])
