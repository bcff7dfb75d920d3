"""AWS Load Balancer Controller: turns the serving Ingress into an ALB, with its IAM role through EKS Pod Identity."""

from __future__ import annotations

from typing import Final

from aws_cdk import Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk import deploy_limits, versions
from cdk.checkov import skip_cfn
from cdk.constructs.addons.alb_controller_policy import controller_statements
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.constructs.pod_identity import PodIdentityRole

NAMESPACE: Final = "kube-system"
SERVICE_ACCOUNT: Final = "aws-load-balancer-controller"
RELEASE: Final = "aws-load-balancer-controller"
# The chart aws-cdk-lib's AlbController installs for this release (AlbControllerVersion.V3_2_2: helm chart 3.2.2).
# Verified: kubernetes-sigs/aws-load-balancer-controller@v3.2.2 helm/aws-load-balancer-controller/Chart.yaml
# (name aws-load-balancer-controller, version 3.2.2), published to https://aws.github.io/eks-charts.
CHART: Final = "aws-load-balancer-controller"
CHART_REPOSITORY: Final = "https://aws.github.io/eks-charts"
_CHART_VERSIONS: Final = {"v3.2.2": "3.2.2"}
# A pod-template annotation that names the association: pods created before it existed got no
# Pod Identity credentials (the EKS webhook injects them at pod creation), so a new association
# (such as the move from IRSA) changes the template and rolls the controller.
ASSOCIATION_ANNOTATION: Final = "sd-on-eks/pod-identity-association"

# The construct ids of aws-cdk-lib's AlbController, kept so that the service account and the Helm
# release keep their logical ids: a new id would make CloudFormation create a second release of the
# same name (helm refuses) and then delete the service account the controller runs as.
_SERVICE_ACCOUNT_SCOPE: Final = "alb-sa"
_SERVICE_ACCOUNT_MANIFEST: Final = f"manifest-{_SERVICE_ACCOUNT_SCOPE}ServiceAccountResource"
_CHART_ID: Final = "Resource"


def image_repository(region: str) -> str:
    """The controller's image repository in the EKS add-on registry of `region` (cdk/versions.py)."""
    registry = versions.EKS_ADDON_REGISTRIES.get(region)
    if registry is None:
        raise ValueError(
            f"setting 'region' = {region!r} has no EKS add-on image registry in cdk/versions.py "
            "(EKS_ADDON_REGISTRIES, from the EKS User Guide's registry table): add the region's registry there"
        )
    return f"{registry}/{versions.ALB_CONTROLLER_IMAGE_REPOSITORY}"


class LoadBalancerController(Construct):
    """The controller on the system nodes, with the IAM policy published for its release, its image from the
    cluster's own region, and credentials from EKS Pod Identity (no IAM OIDC provider).

    The service account is ours (the chart's `serviceAccount.create` is off) and carries no IRSA
    annotation; the role is bound to it by a Pod Identity association, which the chart waits for.
    """

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, agent: eks.Addon | None) -> None:
        """`agent`: the Pod Identity agent add-on to wait for, None where the team's cluster runs its own."""
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        if Token.is_unresolved(region):
            raise ValueError(
                "the load balancer controller's image registry needs an explicit region (setting 'region')"
            )
        self.identity = PodIdentityRole(
            self,
            "PodIdentity",
            cluster=cluster,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description=f"AWS Load Balancer Controller {versions.ALB_CONTROLLER_VERSION} of {cluster.cluster_name}",
        )
        # A managed-style policy beside the role (not inline), as the controller's role had before.
        for statement in controller_statements(versions.ALB_CONTROLLER_VERSION):
            self.identity.role.add_to_principal_policy(statement)
        if agent is not None:
            self.identity.association.node.add_dependency(agent)
        self._skip_published_policy_findings()

        self.service_account = eks.KubernetesManifest(
            Construct(self, _SERVICE_ACCOUNT_SCOPE),
            _SERVICE_ACCOUNT_MANIFEST,
            cluster=cluster,
            manifest=[
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {
                        "name": SERVICE_ACCOUNT,
                        "namespace": NAMESPACE,
                        "labels": {"app.kubernetes.io/name": SERVICE_ACCOUNT},
                    },
                }
            ],
        )
        self.chart = eks.HelmChart(
            self,
            _CHART_ID,
            cluster=cluster,
            chart=CHART,
            repository=CHART_REPOSITORY,
            namespace=NAMESPACE,
            release=RELEASE,
            version=_CHART_VERSIONS[versions.ALB_CONTROLLER_VERSION],
            wait=True,
            # helm waits less than the kubectl handler's own 15-minute Lambda timeout, so a stuck
            # install reaches the stack events as helm's error instead of an hour-long CloudFormation wait.
            timeout=deploy_limits.HELM_WAIT,
            values={
                "clusterName": cluster.cluster_name,
                "serviceAccount": {"create": False, "name": SERVICE_ACCOUNT},
                "region": region,
                "vpcId": cluster.vpc.vpc_id,
                "image": {"repository": image_repository(region), "tag": versions.ALB_CONTROLLER_VERSION},
                "nodeSelector": dict(SYSTEM_NODE_LABEL),
                "replicaCount": 2,
                # Pods get readiness gates in labelled namespaces, so rollouts wait for ALB health.
                "enableServiceMutatorWebhook": False,
                "podAnnotations": {ASSOCIATION_ANNOTATION: self.identity.association.attr_association_arn},
            },
        )
        # Credentials (the association, served by the agent) and the service account before any pod.
        self.chart.node.add_dependency(self.identity.association, self.service_account)
        if agent is not None:
            self.chart.node.add_dependency(agent)

    def _skip_published_policy_findings(self) -> None:
        for policy in self.identity.node.find_all():
            if isinstance(policy, iam.CfnPolicy):
                skip_cfn(
                    policy,
                    {
                        "CKV_AWS_111": "The controller's policy as AWS publishes it for this release "
                        "(alb_controller_policy.py); its write actions are scoped by elbv2.k8s.aws/cluster "
                        "resource tags where the API allows, and it creates load balancers and security "
                        "groups by design."
                    },
                )
