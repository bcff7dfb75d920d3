"""AWS Load Balancer Controller: turns the serving Ingress into an ALB."""

from __future__ import annotations

from aws_cdk import CfnResource, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk import deploy_limits, versions
from cdk.checkov import skip_cfn
from cdk.constructs.cluster import SYSTEM_NODE_LABEL

# Built-in versions come with the IAM policy AWS publishes for that controller release (IRSA).
_VERSIONS = {"v3.2.2": eks.AlbControllerVersion.V3_2_2}


def image_repository(region: str) -> str:
    """The controller's image repository in the EKS add-on registry of `region` (cdk/versions.py)."""
    registry = versions.EKS_ADDON_REGISTRIES.get(region)
    if registry is None:
        raise ValueError(
            f"setting 'region' = {region!r} has no EKS add-on image registry in cdk/versions.py "
            "(EKS_ADDON_REGISTRIES, from the EKS User Guide's registry table): add the region's registry there"
        )
    return f"{registry}/{versions.ALB_CONTROLLER_IMAGE_REPOSITORY}"


def load_balancer_controller(scope: Construct, construct_id: str, *, cluster: eks.Cluster) -> eks.AlbController:
    """Install the controller on the system nodes with its published, per-release IAM policy, pulling its
    image from the cluster's own region."""
    region = Stack.of(scope).region
    if Token.is_unresolved(region):
        raise ValueError("the load balancer controller's image registry needs an explicit region (setting 'region')")
    controller = eks.AlbController(
        scope,
        construct_id,
        cluster=cluster,
        version=_VERSIONS[versions.ALB_CONTROLLER_VERSION],
        repository=image_repository(region),
        additional_helm_chart_values={
            "nodeSelector": dict(SYSTEM_NODE_LABEL),
            "replicaCount": 2,
            # Pods get readiness gates in labelled namespaces, so rollouts wait for ALB health.
            "enableServiceMutatorWebhook": False,
        },
    )
    for policy in controller.node.find_all():
        if isinstance(policy, iam.CfnPolicy):
            skip_cfn(
                policy,
                {
                    "CKV_AWS_111": "The controller's policy as AWS publishes it for this release (aws-cdk-lib "
                    "AlbControllerVersion); its write actions are scoped by elbv2.k8s.aws/cluster resource tags "
                    "where the API allows, and it creates load balancers and security groups by design."
                },
            )
    # aws-cdk-lib gives this chart helm --timeout 15 min with --wait, the kubectl handler's own
    # Lambda timeout: a stuck install would kill the Lambda unreported and CloudFormation would
    # wait its full hour. Wait less, so helm's error reaches the stack events.
    for child in controller.node.find_all():
        if isinstance(child, CfnResource) and child.cfn_resource_type == "Custom::AWSCDK-EKS-HelmChart":
            child.add_property_override("Timeout", f"{int(deploy_limits.HELM_WAIT.to_seconds())}s")
    return controller
