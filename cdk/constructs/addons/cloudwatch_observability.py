"""amazon-cloudwatch-observability: Container Insights with enhanced observability (GPU and Neuron metrics)."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk import versions
from cdk.constructs.pod_identity import PodIdentityRole

NAMESPACE = "amazon-cloudwatch"
SERVICE_ACCOUNT = "cloudwatch-agent"


class CloudWatchObservability(Construct):
    """The EKS add-on, with the agent's credentials through Pod Identity instead of the node role."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, container_logs: bool) -> None:
        """`container_logs`: ship every container's stdout/stderr to CloudWatch Logs (the add-on's containerLogs)."""
        super().__init__(scope, construct_id)
        identity = PodIdentityRole(
            self,
            "Agent",
            cluster=cluster,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description="CloudWatch agent and Fluent Bit: publish Container Insights metrics and logs",
        )
        # The policy AWS documents for this add-on.
        identity.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy"))
        self.agent_role = identity.role
        self.addon = eks.Addon(
            self,
            "Addon",
            cluster=cluster,
            addon_name="amazon-cloudwatch-observability",
            addon_version=versions.CLOUDWATCH_OBSERVABILITY_ADDON_VERSION,
            # Its DaemonSets tolerate all taints by default, so GPU/Neuron nodes are covered.
            configuration_values={"containerLogs": {"enabled": container_logs}},
        )
        # The namespace comes with the add-on; the association may exist before it.
        self.addon.node.add_dependency(identity.association)
