"""The EKS control plane (aws_eks_v2), its access entries and the small system node group."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.node_role import worker_node_role
from cdk.retention import RETAINED

# The control-plane log types by their context names (controlPlaneLogTypes, cdk/config/observability.py).
CONTROL_PLANE_LOGS = {
    "api": eks.ClusterLoggingTypes.API,
    "audit": eks.ClusterLoggingTypes.AUDIT,
    "authenticator": eks.ClusterLoggingTypes.AUTHENTICATOR,
    "controllerManager": eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    "scheduler": eks.ClusterLoggingTypes.SCHEDULER,
}
# EKS's access policy for cluster-admin (EKS User Guide, access policies; aws_eks_v2.AccessPolicyArn).
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# Controllers (Karpenter, LBC, KEDA, CoreDNS) run on these nodes and never on accelerated ones.
SYSTEM_NODE_LABEL = {"role": "system"}


def endpoint_access(config: AppConfig) -> eks.EndpointAccess:
    """The API endpoint access the config asks for: private, or public restricted to CIDRs plus private."""
    if config.endpoint_access == "private":
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*config.endpoint_public_cidrs)


class Cluster(Construct):
    """An EKS cluster with logging, envelope-encrypted secrets and a system managed node group."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"Envelope encryption of Kubernetes secrets in {config.cluster_name}",
            enable_key_rotation=True,
            removal_policy=RETAINED,
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=config.cluster_name,
            version=eks.KubernetesVersion.of(config.kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)],
            endpoint_access=endpoint_access(config),
            cluster_logging=[CONTROL_PLANE_LOGS[t] for t in config.observability.control_plane_log_types],
            secrets_encryption_key=secrets_key,
            # The system node group below is explicit, so it can carry labels and sizes from config.
            default_capacity=0,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            # The CloudFormation execution role that deploys the stack gets cluster-admin through an
            # access entry, so that the kubectl handler can apply charts and manifests.
            bootstrap_cluster_creator_admin_permissions=True,
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV36Layer(self, "KubectlLayer")),
        )
        for index, arn in enumerate(config.admin_role_arns):
            self._admin(f"Admin{index}", arn)
        # Whoever ran `make deploy` (the CLI deploys through the bootstrap roles, so the cluster's creator is
        # CloudFormation's role, not them). EKS takes one access entry per principal: one already in
        # adminRoleArns needs no second.
        deployer = config.access.deployer_arn
        if deployer is not None and deployer not in config.admin_role_arns:
            self._admin("DeployerAdmin", deployer)

        self.system_node_role = worker_node_role(self, "SystemNodeRole")
        self.system_nodes = self.cluster.add_nodegroup_capacity(
            "SystemNodes",
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            capacity_type=eks.CapacityType.ON_DEMAND,
            instance_types=[ec2.InstanceType(config.system_instance_type)],
            min_size=config.system_node_count,
            desired_size=config.system_node_count,
            max_size=config.system_node_count + 2,
            labels=SYSTEM_NODE_LABEL,
            node_role=self.system_node_role,
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        )

    def _admin(self, construct_id: str, principal: str) -> eks.AccessEntry:
        return eks.AccessEntry(
            self,
            construct_id,
            cluster=self.cluster,
            principal=principal,
            access_policies=[
                eks.AccessPolicy.from_access_policy_name(
                    CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )
