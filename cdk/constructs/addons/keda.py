"""KEDA: autoscales the serving Deployments on the service's own CloudWatch metrics."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk import versions
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.constructs.pod_identity import PodIdentityRole

NAMESPACE = "keda"
OPERATOR_SERVICE_ACCOUNT = "keda-operator"
# What the aws-cloudwatch scaler calls. CloudWatch metric reads support no resource-level
# permissions (AWS Service Authorization Reference), so the resource must be "*".
CLOUDWATCH_READ_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics")


class Keda(Construct):
    """The KEDA chart; its operator reads CloudWatch through Pod Identity (TriggerAuthentication
    `podIdentity.provider: aws` with the operator's identity, no static keys)."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster) -> None:
        super().__init__(scope, construct_id)
        identity = PodIdentityRole(
            self,
            "Operator",
            cluster=cluster,
            namespace=NAMESPACE,
            service_account=OPERATOR_SERVICE_ACCOUNT,
            description="KEDA operator: reads CloudWatch metrics for ScaledObjects",
        )
        identity.role.add_to_principal_policy(
            iam.PolicyStatement(sid="ReadCloudWatchMetrics", actions=list(CLOUDWATCH_READ_ACTIONS), resources=["*"])
        )
        self.operator_role = identity.role
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart="keda",
            repository=versions.KEDA_CHART_REPOSITORY,
            version=versions.KEDA_CHART_VERSION,
            release="keda",
            namespace=NAMESPACE,
            create_namespace=True,
            wait=True,
            timeout=Duration.minutes(10),
            values={
                "serviceAccount": {"operator": {"create": True, "name": OPERATOR_SERVICE_ACCOUNT}},
                "nodeSelector": dict(SYSTEM_NODE_LABEL),
            },
        )
        self.chart.node.add_dependency(identity.association)
