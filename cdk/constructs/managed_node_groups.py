"""Accelerated EKS managed node groups, for users who do not want Karpenter (nodeProvisioner=managed)."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk.config import AcceleratorCapacity
from cdk.config.platform import managed_instance_types
from cdk.constructs.node_pools import ROOT_VOLUME_GIB
from cdk.constructs.node_role import worker_node_role

AMI_TYPES = {
    "neuron": eks.NodegroupAmiType.AL2023_X86_64_NEURON,
    "nvidia": eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
}
CAPACITY_TYPES = {"spot": eks.CapacityType.SPOT, "on-demand": eks.CapacityType.ON_DEMAND}


class AcceleratedNodeGroups(Construct):
    """One managed node group per enabled accelerator, tainted and labelled like the Karpenter pools."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, capacity: tuple[AcceleratorCapacity, ...]
    ) -> None:
        super().__init__(scope, construct_id)
        self.node_role = worker_node_role(self, "NodeRole")
        self.node_groups: dict[str, eks.Nodegroup] = {}
        for item in capacity:
            accelerator = item.accelerator
            self.node_groups[item.name] = cluster.add_nodegroup_capacity(
                f"{item.name.capitalize()}Nodes",
                ami_type=AMI_TYPES[item.name],
                # One type per managed node group (the config rejects a fallback list here).
                capacity_type=CAPACITY_TYPES[item.capacity_types[0]],
                instance_types=[ec2.InstanceType(t) for t in managed_instance_types(item)],
                # One node to serve on; without Karpenter nothing scales the group, so users raise
                # desiredSize themselves (or add an autoscaler) up to the configured maximum.
                min_size=0,
                desired_size=1,
                max_size=item.max_nodes,
                disk_size=ROOT_VOLUME_GIB,
                labels=dict(accelerator.node_label),
                taints=[
                    eks.TaintSpec(
                        key=accelerator.taint["key"],
                        value=accelerator.taint["value"],
                        effect=eks.TaintEffect.NO_SCHEDULE,
                    )
                ],
                node_role=self.node_role,
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            )
