"""ClusterStack: the EKS cluster, its add-ons and its accelerated capacity."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk.accelerators import NEURON, NVIDIA, needs_neuron_scheduler
from cdk.config import AppConfig
from cdk.constructs.addons.cloudwatch_observability import CloudWatchObservability
from cdk.constructs.addons.keda import Keda
from cdk.constructs.addons.load_balancer_controller import LoadBalancerController
from cdk.constructs.addons.neuron import neuron_chart
from cdk.constructs.addons.nvidia_device_plugin import nvidia_device_plugin
from cdk.constructs.addons.pod_identity_agent import pod_identity_agent
from cdk.constructs.addons.vpc_cni import vpc_cni
from cdk.constructs.cluster import Cluster
from cdk.constructs.karpenter import Karpenter
from cdk.constructs.kubectl_tunnel import KubectlTunnel
from cdk.constructs.managed_node_groups import AcceleratedNodeGroups
from cdk.constructs.network import Network
from cdk.constructs.node_pools import AcceleratorNodePools
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.constructs.spot_role import SpotServiceLinkedRole
from cdk.kubectl_access import DEFAULT_LOCAL_PORT, TUNNEL_INSTANCE_OUTPUT, session_command, shell_line


class ClusterStack(Stack):
    """One cluster with controllers on a system node group and accelerated nodes on demand."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        vpc: ec2.IVpc | None,
        neuron_devices_per_pod: int = 1,
        **kwargs: Any,
    ) -> None:
        """`neuron_devices_per_pod`: the most Neuron devices any workload's pod asks for (more than one needs the
        Neuron scheduler extension)."""
        super().__init__(scope, construct_id, description="Stable Diffusion on EKS: cluster and add-ons", **kwargs)
        # An existing VPC is looked up here: a network stack of its own would have no resources.
        self.vpc: ec2.IVpc = vpc if vpc is not None else Network(self, "Network", config=config).vpc
        built = Cluster(self, "Eks", config=config, vpc=self.vpc)
        cluster = self.cluster = built.cluster
        self.system_nodes = built.system_nodes
        self.system_node_role = built.system_node_role
        enabled = {a.name for a in config.accelerators}

        agent = pod_identity_agent(cluster)
        self.vpc_cni = vpc_cni(self, "VpcCni", cluster=cluster)
        self.karpenter: Karpenter | None = None
        self.node_pools: AcceleratorNodePools | None = None
        self.node_groups: AcceleratedNodeGroups | None = None
        if config.node_provisioner == "karpenter":
            self.karpenter = Karpenter(self, "Karpenter", cluster=cluster, cluster_name=config.cluster_name)
            self.karpenter.chart.node.add_dependency(built.system_nodes)
            if config.capacity:
                self.node_pools = AcceleratorNodePools(
                    self,
                    "NodePools",
                    cluster=cluster,
                    capacity=config.capacity,
                    cluster_name=config.cluster_name,
                    instance_profile=self.karpenter.instance_profile.instance_profile_name,
                    security_group_id=cluster.cluster_security_group_id,
                    karpenter_chart=self.karpenter.chart,
                )
        elif config.capacity:
            self.node_groups = AcceleratedNodeGroups(
                self, "AcceleratedNodes", cluster=cluster, capacity=config.capacity
            )

        self.load_balancer_controller = LoadBalancerController(
            self, "LoadBalancerController", cluster=cluster, agent=agent
        )
        self.keda = Keda(self, "Keda", cluster=cluster)
        self.cloudwatch = CloudWatchObservability(
            self,
            "CloudWatchObservability",
            cluster=cluster,
            container_logs=config.observability.container_logs,
        )
        self.nvidia_device_plugin = (
            nvidia_device_plugin(self, "NvidiaDevicePlugin", cluster=cluster) if NVIDIA.name in enabled else None
        )
        self.neuron = (
            neuron_chart(
                self,
                "NeuronChart",
                cluster=cluster,
                scheduler_extension=needs_neuron_scheduler(NEURON, neuron_devices_per_pod),
            )
            if NEURON.name in enabled
            else None
        )

        # Controllers need nodes to run on, and credentials before their first API call.
        for chart in (self.keda.chart, self.load_balancer_controller, self.nvidia_device_plugin, self.neuron):
            if chart is not None:
                chart.node.add_dependency(built.system_nodes)
        for association in self.node.find_all():
            if isinstance(association, PodIdentityRole):
                association.association.node.add_dependency(agent)

        # Spot launches need the account's EC2 Spot service-linked role before the first node.
        self.spot_role: SpotServiceLinkedRole | None = None
        if any("spot" in c.capacity_types for c in config.capacity):
            self.spot_role = SpotServiceLinkedRole(self, "SpotServiceLinkedRole")
            for capacity in (self.node_pools, self.node_groups):
                if capacity is not None:
                    capacity.node.add_dependency(self.spot_role)

        self.kubectl_tunnel = (
            KubectlTunnel(self, "KubectlTunnel", cluster=cluster, vpc=self.vpc)
            if config.access.kubectl_tunnel
            else None
        )

        CfnOutput(self, "ClusterName", value=cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfig",
            value=f"aws eks update-kubeconfig --name {cluster.cluster_name} --region {self.region}",
        )
        if self.kubectl_tunnel is not None:
            CfnOutput(
                self,
                TUNNEL_INSTANCE_OUTPUT,
                value=self.kubectl_tunnel.instance.instance_id,
                description="The instance `make kubectl-tunnel` port-forwards through to the private API endpoint",
            )
            # The session on its own, for those who write their kubeconfig themselves (docs/platform.md).
            host = Fn.select(2, Fn.split("/", cluster.cluster_endpoint))
            command = session_command(
                instance_id=self.kubectl_tunnel.instance.instance_id,
                endpoint_host=host,
                local_port=DEFAULT_LOCAL_PORT,
                region=self.region,
            )
            CfnOutput(
                self,
                "KubectlTunnelSession",
                value=shell_line(command),
                description="The port-forwarding session `make kubectl-tunnel` starts (it also writes the kubeconfig)",
            )
