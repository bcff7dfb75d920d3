"""Karpenter NodePools and EC2NodeClasses, one pair per enabled accelerator.

The manifests are built by pure functions (dicts in, dicts out) so that tests can validate them
against the Karpenter v1 schemas; the construct only applies them to the cluster.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk import versions
from cdk.config import AcceleratorCapacity
from cdk.constructs.network import KARPENTER_DISCOVERY_TAG

# Root volume of every accelerated node (Karpenter or managed): the DLC images are large (the
# Neuron one is over 10 GiB unpacked) and the model cache sits on the node's disk as well.
ROOT_VOLUME_GIB = 200


def node_class_name(capacity: AcceleratorCapacity) -> str:
    """The EC2NodeClass and NodePool name for one accelerator."""
    return capacity.name


def ec2_node_class_manifest(
    capacity: AcceleratorCapacity,
    *,
    cluster_name: str,
    instance_profile: str | None,
    security_group_id: str,
    node_role: str | None = None,
) -> dict[str, Any]:
    """The EC2NodeClass: pinned AL2023 AMI alias, private subnets by tag, encrypted gp3 root, IMDSv2 only.

    The nodes' identity is our instance profile, or on a team's cluster whose Karpenter is theirs
    (`node_role`) the role their controller may pass: an EC2NodeClass takes one of `role` and
    `instanceProfile` (karpenter.sh/docs/concepts/nodeclasses, "spec.role").
    """
    identity = {"role": node_role} if node_role is not None else {"instanceProfile": instance_profile}
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": node_class_name(capacity)},
        "spec": {
            # AL2023 picks the Neuron or NVIDIA accelerated variant from the instance type.
            "amiSelectorTerms": [{"alias": versions.AL2023_AMI_ALIAS}],
            **identity,
            "subnetSelectorTerms": [{"tags": {KARPENTER_DISCOVERY_TAG: cluster_name}}],
            "securityGroupSelectorTerms": [{"id": security_group_id}],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                # 1 hop: pods cannot reach the node role's credentials through IMDS.
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{ROOT_VOLUME_GIB}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            # Karpenter adds the cluster and node pool tags itself (and rejects them here).
            "tags": {"accelerator": capacity.name},
        },
    }


def node_pool_manifest(capacity: AcceleratorCapacity) -> dict[str, Any]:
    """The NodePool: instance families from config, accelerator taint and label, consolidation, limits."""
    accelerator = capacity.accelerator
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": node_class_name(capacity)},
        "spec": {
            "template": {
                "metadata": {"labels": dict(accelerator.node_label)},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": node_class_name(capacity),
                    },
                    # Only pods that tolerate the accelerator's taint land here, so CPU pods never
                    # keep an expensive node alive.
                    "taints": [accelerator.taint],
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": list(capacity.instance_families),
                        },
                        # Both listed: Karpenter launches Spot while it can and falls back to on-demand
                        # when EC2 has no Spot capacity (cdk/config/platform.py cites the docs).
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": list(capacity.capacity_types),
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    # Recycle nodes monthly so they pick up patched AMIs when the alias is bumped.
                    "expireAfter": "720h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                # Accelerated nodes take minutes to join and load a model: do not churn them.
                "consolidateAfter": "5m",
                "budgets": [{"nodes": "10%"}],
            },
            "limits": {"cpu": str(capacity.max_vcpu)},
            "weight": 10,
        },
    }


def manifests_for(
    capacity: AcceleratorCapacity,
    *,
    cluster_name: str,
    instance_profile: str | None,
    security_group_id: str,
    node_role: str | None = None,
    owner_labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The EC2NodeClass and NodePool of one accelerator, in apply order; `owner_labels` on both (a team's
    cluster: they say whose the objects are)."""
    objects = [
        ec2_node_class_manifest(
            capacity,
            cluster_name=cluster_name,
            instance_profile=instance_profile,
            security_group_id=security_group_id,
            node_role=node_role,
        ),
        node_pool_manifest(capacity),
    ]
    if owner_labels:
        for item in objects:
            item["metadata"]["labels"] = dict(owner_labels)
    return objects


class AcceleratorNodePools(Construct):
    """Applies one EC2NodeClass + NodePool per enabled accelerator once Karpenter's CRDs exist."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        capacity: tuple[AcceleratorCapacity, ...],
        cluster_name: str,
        instance_profile: str | None,
        security_group_id: str,
        karpenter_chart: Construct | None,
        node_role: str | None = None,
        owner_labels: dict[str, str] | None = None,
    ) -> None:
        """`karpenter_chart`: ours, applied first (None: the team's Karpenter runs already). With `owner_labels`
        (a team's cluster) the objects are created, never applied over: a NodePool of the same name that is
        not ours fails the deploy instead of being taken over."""
        super().__init__(scope, construct_id)
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        for item in capacity:
            manifest = eks.KubernetesManifest(
                self,
                item.name.capitalize(),
                cluster=cluster,
                manifest=manifests_for(
                    item,
                    cluster_name=cluster_name,
                    instance_profile=instance_profile,
                    security_group_id=security_group_id,
                    node_role=node_role,
                    owner_labels=owner_labels,
                ),
                overwrite=not owner_labels,
            )
            # The CRDs come with the Karpenter chart.
            if karpenter_chart is not None:
                manifest.node.add_dependency(karpenter_chart)
            self.manifests[item.name] = manifest
