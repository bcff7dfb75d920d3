"""The IAM role every EKS worker node needs, in one place for all three kinds of node."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from constructs import Construct

# What the kubelet, the VPC CNI and image pulls from ECR need; nothing else.
WORKER_NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly")


def worker_node_role(
    scope: Construct, construct_id: str, *, description: str | None = None, extra_policies: Sequence[str] = ()
) -> iam.Role:
    """An EC2 role with the worker-node managed policies (plus any named extra AWS managed policies)."""
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        description=description,
        managed_policies=[
            iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in (*WORKER_NODE_POLICIES, *extra_policies)
        ],
    )
