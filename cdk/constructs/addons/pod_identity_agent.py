"""The eks-pod-identity-agent add-on, which hands Pod Identity credentials to pods."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks

from cdk import versions


def pod_identity_agent(cluster: eks.Cluster) -> eks.Addon:
    """The cluster's own agent add-on, with its version pinned.

    aws_eks_v2 creates this add-on lazily whenever a construct (such as a ServiceAccount with
    IdentityType.POD_IDENTITY) asks for it; using the same instance keeps one add-on per cluster
    whichever stack asks first, and the override pins the version it would otherwise leave open.
    """
    agent = cluster.eks_pod_identity_agent
    agent.node.default_child.add_property_override("AddonVersion", versions.POD_IDENTITY_AGENT_ADDON_VERSION)
    return agent
