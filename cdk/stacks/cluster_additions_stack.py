"""ClusterAdditionsStack: what the app adds to an EKS cluster a team already runs (existingClusterName).

It imports the cluster (`aws_eks_v2.Cluster.from_cluster_attributes`) instead of creating network and cluster
stacks, and adds only what is ours: the Karpenter NodePools and EC2NodeClasses of our accelerators (labelled as
ours, created, never applied over a team's object of the same name), and each prerequisite whose setting says
`install`, as on a new cluster. A prerequisite set to `expect` is the team's: nothing of it is synthesized; a
deploy-time check fails the deploy naming it when it is missing (cdk/constructs/prerequisite_checks.py) and
`make verify` checks it (cdk/prerequisites.py). Deleting this stack removes exactly these.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer
from constructs import Construct

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA, needs_neuron_scheduler
from cdk.config import AppConfig
from cdk.config.existing_cluster import ExistingClusterConfig
from cdk.constructs.addons.cloudwatch_observability import CloudWatchObservability
from cdk.constructs.addons.keda import Keda
from cdk.constructs.addons.load_balancer_controller import LoadBalancerController
from cdk.constructs.addons.neuron import neuron_chart
from cdk.constructs.addons.nvidia_device_plugin import nvidia_device_plugin
from cdk.constructs.karpenter import Karpenter
from cdk.constructs.network import Network
from cdk.constructs.node_pools import AcceleratorNodePools
from cdk.constructs.prerequisite_checks import PrerequisiteChecks
from cdk.constructs.spot_role import SpotServiceLinkedRole
from cdk.prerequisites import relied_on

# The labels every cluster-scoped object we add to a team's cluster carries: whose it is.
OWNER_LABELS: Final = {"app.kubernetes.io/managed-by": "sd-on-eks", "app.kubernetes.io/part-of": "sd-on-eks"}


class ClusterAdditionsStack(Stack):
    """The team's cluster, imported, and what we add to it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        existing: ExistingClusterConfig,
        neuron_devices_per_pod: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, construct_id, description="Stable Diffusion on EKS: additions to an existing cluster", **kwargs
        )
        self.vpc: ec2.IVpc = Network(self, "Network", config=config).vpc  # looked up by vpcId
        security_group = ec2.SecurityGroup.from_security_group_id(
            self, "ClusterSecurityGroup", existing.security_group_id, mutable=False
        )
        # The kubectl handler runs as the team's admin-mapped role, in the cluster's private subnets and security
        # group, so it reaches a private endpoint and no access entry of the cluster changes for it. An imported
        # cluster ignores kubectl_provider_options (aws-cdk-lib 2.275 aws-eks-v2/lib/cluster.js ImportedCluster
        # reads only kubectlProvider), so the provider is made for a first import and handed to the second.
        reference = eks.Cluster.from_cluster_attributes(
            self, "ClusterReference", cluster_name=existing.name, vpc=self.vpc
        )
        kubectl_role = iam.Role.from_role_arn(self, "KubectlRole", existing.kubectl_role_arn, mutable=False)
        self.kubectl_provider = eks.KubectlProvider(
            self,
            "KubectlProvider",
            cluster=reference,
            kubectl_layer=KubectlV36Layer(self, "KubectlLayer"),
            role=kubectl_role,
            private_subnets=self.vpc.private_subnets,
            security_groups=[security_group],
        )
        self.cluster: eks.ICluster = eks.Cluster.from_cluster_attributes(
            self,
            "Cluster",
            cluster_name=existing.name,
            cluster_security_group_id=existing.security_group_id,
            vpc=self.vpc,
            kubectl_provider=self.kubectl_provider,
        )
        cluster = self.cluster
        enabled = {a.name for a in config.accelerators}
        # Expected add-ons are read before anything of ours is applied: a missing one fails here, in one line.
        expected = relied_on(
            existing.expected, enabled, neuron_scheduler=needs_neuron_scheduler(NEURON, neuron_devices_per_pod)
        )
        self.prerequisite_checks = (
            PrerequisiteChecks(
                self,
                "PrerequisiteChecks",
                cluster_name=existing.name,
                expected=expected,
                role=kubectl_role,
                vpc=self.vpc,
                security_group=security_group,
            )
            if expected
            else None
        )

        self.agent = (
            eks.Addon(
                self,
                "PodIdentityAgent",
                cluster=cluster,
                addon_name="eks-pod-identity-agent",
                addon_version=versions.POD_IDENTITY_AGENT_ADDON_VERSION,
            )
            if existing.installs("pod-identity-agent")
            else None
        )
        self.karpenter = (
            Karpenter(self, "Karpenter", cluster=cluster, cluster_name=existing.name)
            if existing.installs("karpenter")
            else None
        )
        self.node_pools = AcceleratorNodePools(
            self,
            "NodePools",
            cluster=cluster,
            capacity=config.capacity,
            cluster_name=existing.name,
            instance_profile=self.karpenter.instance_profile.instance_profile_name if self.karpenter else None,
            security_group_id=existing.security_group_id,
            karpenter_chart=self.karpenter.chart if self.karpenter else None,
            node_role=existing.node_role_name,
            owner_labels=OWNER_LABELS,
        )
        self.load_balancer_controller = (
            LoadBalancerController(self, "LoadBalancerController", cluster=cluster, agent=self.agent)
            if existing.installs("load-balancer-controller")
            else None
        )
        self.keda = Keda(self, "Keda", cluster=cluster) if existing.installs("keda") else None
        self.cloudwatch = (
            CloudWatchObservability(
                self, "CloudWatchObservability", cluster=cluster, container_logs=config.observability.container_logs
            )
            if existing.installs("cloudwatch-agent")
            else None
        )
        self.nvidia_device_plugin = (
            nvidia_device_plugin(self, "NvidiaDevicePlugin", cluster=cluster)
            if NVIDIA.name in enabled and existing.installs("nvidia-device-plugin")
            else None
        )
        self.neuron = (
            neuron_chart(
                self,
                "NeuronChart",
                cluster=cluster,
                scheduler_extension=needs_neuron_scheduler(NEURON, neuron_devices_per_pod),
            )
            if NEURON.name in enabled and existing.installs("neuron")
            else None
        )
        if self.prerequisite_checks is not None:
            # Our NodePools need the team's Karpenter CRDs: they wait for the verdict.
            self.node_pools.node.add_dependency(self.prerequisite_checks)
        self.spot_role: SpotServiceLinkedRole | None = None
        if any("spot" in c.capacity_types for c in config.capacity):
            self.spot_role = SpotServiceLinkedRole(self, "SpotServiceLinkedRole")
            self.node_pools.node.add_dependency(self.spot_role)

        CfnOutput(self, "ClusterName", value=existing.name, description="The team's cluster this app serves on")
        CfnOutput(
            self,
            "ClusterResources",
            value=(
                f"vpc {self.vpc.vpc_id}; nodes in subnets tagged karpenter.sh/discovery={existing.name} with "
                f"security group {existing.security_group_id}; pod credentials through EKS Pod Identity "
                "associations (no OIDC provider)"
            ),
            description="What of the team's cluster the app uses, and where each comes from (settings)",
        )
        CfnOutput(
            self,
            "ExpectedPrerequisites",
            value=", ".join(expected) or "none",
            description="The team's add-ons the serving stack relies on (make verify checks each)",
        )
