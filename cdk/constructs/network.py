"""The VPC the cluster runs in: a new one across several AZs, or an existing one looked up by id.

A new VPC has three subnet groups: `public` (NAT gateways and an internet-facing ALB), `private`
(nodes and pods: the VPC CNI gives every pod a VPC address) and `load-balancers` (an internal ALB and
CloudFront's VPC-origin interfaces, nothing else). The serving pods' NetworkPolicy admits only the
load balancer's subnets, so no pod address can reach them (cdk/serving/network_policy.py).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.log_groups import encrypted_log_group

# Tags the AWS Load Balancer Controller uses to pick subnets for internet-facing/internal ALBs,
# and the one Karpenter's EC2NodeClass selects subnets by.
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
# Subnet group names of a new VPC (what `IVpc.select_subnets(subnet_group_name=...)` takes).
PUBLIC_SUBNET_GROUP = "public"
PRIVATE_SUBNET_GROUP = "private"
LOAD_BALANCER_SUBNET_GROUP = "load-balancers"


class Network(Construct):
    """A VPC with public subnets (ALB, NAT) and private subnets (nodes), flow logs on."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig) -> None:
        super().__init__(scope, construct_id)
        if config.vpc_id is not None:
            # An existing VPC: its subnets must already carry the ELB tags (see docs/platform.md);
            # tags cannot be added to resources this app does not own.
            self.vpc: ec2.IVpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=config.vpc_id)
            return

        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            max_azs=config.max_azs,
            # One NAT per AZ: nodes in an AZ keep pulling images when another AZ fails.
            nat_gateways=config.max_azs,
            subnet_configuration=[
                ec2.SubnetConfiguration(name=PUBLIC_SUBNET_GROUP, subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                # /19 private subnets: the VPC CNI gives every pod a VPC address.
                ec2.SubnetConfiguration(
                    name=PRIVATE_SUBNET_GROUP, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=19
                ),
                # Last, so the CIDRs of the groups above stay as they were. No route out: an internal ALB
                # only answers, and its access logs are written by the ELB service, not from the subnet.
                ec2.SubnetConfiguration(
                    name=LOAD_BALANCER_SUBNET_GROUP, subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                ),
            ],
            restrict_default_security_group=True,
        )
        log_group = encrypted_log_group(self, "FlowLogs", removal_policy=RemovalPolicy.DESTROY)
        # RetentionDays is a named enum; the validated day count goes straight to the L1 property.
        log_group.node.default_child.retention_in_days = config.flow_log_retention_days
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group),
            traffic_type=ec2.FlowLogTrafficType[config.observability.flow_log_traffic],
        )
        for subnet in vpc.public_subnets:
            Tags.of(subnet).add(PUBLIC_ELB_TAG, "1")
        for subnet in vpc.private_subnets:
            Tags.of(subnet).add(KARPENTER_DISCOVERY_TAG, config.cluster_name)
        for subnet in vpc.isolated_subnets:
            Tags.of(subnet).add(INTERNAL_ELB_TAG, "1")
        self.vpc = vpc
