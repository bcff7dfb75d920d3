"""Karpenter: controller IAM (Pod Identity), node role and instance profile, interruption queue, chart."""

from __future__ import annotations

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdk import versions
from cdk.checkov import skip_cfn_child
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.constructs.node_role import worker_node_role
from cdk.constructs.pod_identity import PodIdentityRole

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
# The EC2 events that warn of a node going away; Karpenter drains the node when one arrives.
INTERRUPTION_EVENTS: dict[str, events.EventPattern] = {
    "ScheduledChange": events.EventPattern(source=["aws.health"], detail_type=["AWS Health Event"]),
    "SpotInterruption": events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Spot Instance Interruption Warning"]),
    "Rebalance": events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Instance Rebalance Recommendation"]),
    "InstanceStateChange": events.EventPattern(
        source=["aws.ec2"], detail_type=["EC2 Instance State-change Notification"]
    ),
}


class Karpenter(Construct):
    """Everything Karpenter needs to launch and retire accelerated nodes for this cluster."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, cluster_name: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)

        self.node_role = worker_node_role(
            self,
            "NodeRole",
            description=f"Role of the accelerated nodes Karpenter launches in {cluster_name}",
            extra_policies=("AmazonSSMManagedInstanceCore",),
        )
        # We own the instance profile (EC2NodeClass.spec.instanceProfile), so the controller needs
        # no iam:*InstanceProfile permissions at all.
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.node_role)
        # Nodes join through an EC2_LINUX access entry (no aws-auth ConfigMap).
        self.node_access = eks.AccessEntry(
            self,
            "NodeAccess",
            cluster=cluster,
            principal=self.node_role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )

        self.queue = sqs.Queue(
            self,
            "InterruptionQueue",
            retention_period=Duration.minutes(5),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        skip_cfn_child(
            self.queue,
            {
                "CKV_AWS_27": "Encrypted at rest with SQS-managed SSE (SqsManagedSseEnabled), as Karpenter's own "
                "CloudFormation does; the check only recognises a KMS key, which EventBridge could not use "
                "without a key policy for events.amazonaws.com and which would add nothing for 5-minute "
                "interruption notices."
            },
        )
        for name, pattern in INTERRUPTION_EVENTS.items():
            events.Rule(self, f"{name}Rule", event_pattern=pattern, targets=[targets.SqsQueue(self.queue)])

        identity = PodIdentityRole(
            self,
            "Controller",
            cluster=cluster,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description=f"Karpenter controller of {cluster_name}",
        )
        self.controller_role = identity.role
        for statement in controller_statements(
            cluster_name=cluster_name,
            cluster_arn=cluster.cluster_arn,
            queue_arn=self.queue.queue_arn,
            node_role_arn=self.node_role.role_arn,
            instance_profile_arn=self.instance_profile.instance_profile_arn,
            region=stack.region,
        ):
            self.controller_role.add_to_principal_policy(statement)

        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart="karpenter",
            repository=versions.KARPENTER_CHART_REPOSITORY,
            version=versions.KARPENTER_CHART_VERSION,
            release="karpenter",
            namespace=NAMESPACE,
            wait=True,
            timeout=Duration.minutes(10),
            values={
                "settings": {"clusterName": cluster_name, "interruptionQueue": self.queue.queue_name},
                "serviceAccount": {"name": SERVICE_ACCOUNT},
                # Karpenter must not run on capacity it manages.
                "nodeSelector": dict(SYSTEM_NODE_LABEL),
                "controller": {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
                "replicas": 2,
            },
        )
        # Credentials must be in place before the controller starts.
        self.chart.node.add_dependency(identity.association)


def controller_statements(
    *, cluster_name: str, cluster_arn: str, queue_arn: str, node_role_arn: str, instance_profile_arn: str, region: str
) -> list[iam.PolicyStatement]:
    """Karpenter v1's controller policy, scoped to this cluster's tags, minus instance-profile management."""
    partition, account = Aws.PARTITION, Aws.ACCOUNT_ID

    def ec2_arn(resource: str, *, with_account: bool = True) -> str:
        return f"arn:{partition}:ec2:{region}:{account if with_account else ''}:{resource}"

    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    launched = [
        ec2_arn(f"{kind}/*") for kind in ("fleet", "instance", "volume", "network-interface", "launch-template")
    ] + [ec2_arn("spot-instances-request/*")]
    return [
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[
                ec2_arn("image/*", with_account=False),
                ec2_arn("snapshot/*", with_account=False),
                ec2_arn("security-group/*"),
                ec2_arn("subnet/*"),
                ec2_arn("capacity-reservation/*"),
            ],
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2LaunchTemplateAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[ec2_arn("launch-template/*")],
            conditions={
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceActionsWithTags",
            actions=["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            resources=launched,
            conditions={
                "StringEquals": request_owned,
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=launched,
            conditions={
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceTagging",
            actions=["ec2:CreateTags"],
            resources=[ec2_arn("instance/*")],
            conditions={
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedDeletion",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=[ec2_arn("instance/*"), ec2_arn("launch-template/*")],
            conditions={
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        ),
        # EC2 Describe* actions support no resource-level permissions (AWS Service Authorization
        # Reference), so "*" is the only valid resource; the region condition narrows it.
        iam.PolicyStatement(
            sid="AllowRegionalReadActions",
            actions=[
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": region}},
        ),
        iam.PolicyStatement(
            sid="AllowSSMReadActions",
            actions=["ssm:GetParameter"],
            resources=[f"arn:{partition}:ssm:{region}::parameter/aws/service/*"],
        ),
        # The Price List API has no resource-level permissions either.
        iam.PolicyStatement(sid="AllowPricingReadActions", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="AllowInterruptionQueueActions",
            actions=["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            resources=[queue_arn],
        ),
        iam.PolicyStatement(
            sid="AllowPassingInstanceRole",
            actions=["iam:PassRole"],
            resources=[node_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com"]}},
        ),
        iam.PolicyStatement(
            sid="AllowInstanceProfileReadActions",
            actions=["iam:GetInstanceProfile"],
            resources=[instance_profile_arn],
        ),
        iam.PolicyStatement(
            sid="AllowAPIServerEndpointDiscovery", actions=["eks:DescribeCluster"], resources=[cluster_arn]
        ),
    ]
