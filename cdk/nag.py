"""Checks on every synth: cdk-nag's AwsSolutionsChecks, and our own where cdk-nag is blind.

Every acknowledgement names the finding exactly (cdk-nag v3 has no blanket suppressions) and says
why it is acceptable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
import jsii
from aws_cdk import aws_eks as eks_l1
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

if TYPE_CHECKING:
    from cdk.build import PlatformStacks

REQUIRED_LOG_TYPES = frozenset({"api", "audit", "authenticator"})


def cluster_problems(cluster: eks_l1.CfnCluster) -> list[str]:
    """What is wrong with an AWS::EKS::Cluster's logging and endpoint access (empty when nothing)."""
    stack = cdk.Stack.of(cluster)
    problems = []
    logging = stack.resolve(cluster.logging) or {}
    enabled = set()
    for entry in (logging.get("clusterLogging") or {}).get("enabledTypes") or []:
        enabled.add(entry.get("type"))
    missing = REQUIRED_LOG_TYPES - enabled
    if missing:
        problems.append(f"control-plane logging misses {sorted(missing)}")
    vpc = stack.resolve(cluster.resources_vpc_config) or {}
    if not vpc.get("endpointPrivateAccess"):
        problems.append("the private API endpoint is off: nodes would reach the API over the internet")
    if vpc.get("endpointPublicAccess", True):
        cidrs = vpc.get("publicAccessCidrs") or []
        if not cidrs or "0.0.0.0/0" in cidrs:
            problems.append("the public API endpoint is open to 0.0.0.0/0: restrict endpointPublicCidrs")
    return problems


@jsii.implements(cdk.IAspect)
class EksClusterChecks:
    """Errors (which fail `cdk synth`) for an EKS cluster without logging or with an open endpoint."""

    def visit(self, node: IConstruct) -> None:
        """Check every AWS::EKS::Cluster in the tree."""
        if isinstance(node, eks_l1.CfnCluster):
            for problem in cluster_problems(node):
                cdk.Annotations.of(node).add_error(f"[EksClusterChecks] {problem}")


def add_nag_checks(app: cdk.App, platform: PlatformStacks) -> None:
    """Register cdk-nag and our own checks on the app, with the platform's acknowledgements."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    cdk.Aspects.of(app).add(EksClusterChecks())
    acknowledge_platform(platform)


def _ack(scope: IConstruct, rule: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(id=rule, reason=reason)


def acknowledge_platform(platform: PlatformStacks) -> None:
    """The platform's acknowledged findings, each with its reason."""
