"""The vpc-cni EKS add-on with Kubernetes NetworkPolicy enforcement turned on.

EKS installs the VPC CNI self-managed, with network policies off: NetworkPolicy objects are then
accepted and ignored. Taking it over as a managed add-on with `enableNetworkPolicy` (EKS user guide,
"Configure your cluster for Kubernetes network policies", cni-network-policy.html) makes the
serving namespace's policies (cdk/serving/network_policy.py) real.
"""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct


def vpc_cni(scope: Construct, construct_id: str, *, cluster: eks.ICluster) -> eks.Addon:
    """The managed add-on, overwriting the self-managed install's settings it takes over.

    No addon_version: EKS resolves its default for the cluster's Kubernetes minor once, at creation,
    and CloudFormation keeps it until this code names a version (docs/platform.md lists the command
    that shows the resolved version, to pin it).
    """
    addon = eks.Addon(
        scope,
        construct_id,
        cluster=cluster,
        addon_name="vpc-cni",
        configuration_values={"enableNetworkPolicy": "true"},
    )
    # The self-managed DaemonSet's fields are taken over rather than failing the create.
    addon.node.default_child.add_property_override("ResolveConflicts", "OVERWRITE")
    return addon
