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
# The rules of Karpenter's own template (aws/karpenter-provider-aws v1.14.1,
# website/content/en/preview/getting-started/getting-started-with-karpenter/cloudformation.yaml).
INTERRUPTION_EVENTS: dict[str, events.EventPattern] = {
    "ScheduledChange": events.EventPattern(source=["aws.health"], detail_type=["AWS Health Event"]),
    "SpotInterruption": events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Spot Instance Interruption Warning"]),
    "Rebalance": events.EventPattern(source=["aws.ec2"], detail_type=["EC2 Instance Rebalance Recommendation"]),
    "InstanceStateChange": events.EventPattern(
        source=["aws.ec2"], detail_type=["EC2 Instance State-change Notification"]
    ),
    "CapacityReservationInterruption": events.EventPattern(
        source=["aws.ec2"], detail_type=["EC2 Capacity Reservation Instance Interruption Warning"]
    ),
}


class Karpenter(Construct):
    """Everything Karpenter needs to launch and retire accelerated nodes for this cluster."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.ICluster, cluster_name: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)

        self.node_role = worker_node_role(
            self,
            "NodeRole",
            description=f"Role of the accelerated nodes Karpenter launches in {cluster_name}",
            extra_policies=("AmazonSSMManagedInstanceCore",),
        )
        # We own the instance profile (EC2NodeClass.spec.instanceProfile), so the controller needs
        # no instance-profile write permissions (see controller_statements).
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
    *, cluster_name: str, cluster_arn: str, queue_arn: str, node_role_arn: str, region: str
) -> list[iam.PolicyStatement]:
    """Karpenter's controller policy, action for action and condition for condition, minus
    instance-profile management.

    Source: aws/karpenter-provider-aws tag v1.14.1,
    website/content/en/preview/getting-started/getting-started-with-karpenter/cloudformation.yaml
    (the same file as website/content/en/v1.14/... on main); tests/cdk/test_karpenter_policy.py
    holds its action list. Two deliberate differences, both narrower:
    - the five instance-profile write actions (Create/Tag/AddRoleTo/RemoveRoleFrom/DeleteInstanceProfile)
      are left out: the EC2NodeClass names our own instance profile (spec.instanceProfile), so
      Karpenter creates none. Its finalizer still lists and reads profiles (ListInstanceProfiles,
      GetInstanceProfile on any profile: it probes a legacy profile name), which is granted: without
      them the finalizer fails and `cdk destroy` hangs on the EC2NodeClass.
    - resources Karpenter creates (instances, fleets, launch templates, ...) are named in this
      account instead of any account (`*`); what may be shared from another account (subnets,
      security groups, capacity reservations, placement groups) keeps upstream's `*` account.
    """
    partition, account = Aws.PARTITION, Aws.ACCOUNT_ID

    def ec2_arn(resource: str, *, owner: str = account) -> str:
        return f"arn:{partition}:ec2:{region}:{owner}:{resource}"

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
                ec2_arn("image/*", owner=""),
                ec2_arn("snapshot/*", owner=""),
                *(
                    ec2_arn(f"{kind}/*", owner="*")
                    for kind in ("security-group", "subnet", "capacity-reservation", "placement-group")
                ),
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
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
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
            conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        ),
        # iam:ListInstanceProfiles supports no resource-level permissions.
        iam.PolicyStatement(
            sid="AllowUnscopedInstanceProfileListAction", actions=["iam:ListInstanceProfiles"], resources=["*"]
        ),
        iam.PolicyStatement(
            sid="AllowInstanceProfileReadActions",
            actions=["iam:GetInstanceProfile"],
            resources=[f"arn:{partition}:iam::{account}:instance-profile/*"],
        ),
        iam.PolicyStatement(
            sid="AllowAPIServerEndpointDiscovery", actions=["eks:DescribeCluster"], resources=[cluster_arn]
        ),
        # GetManagedResource is authorized on "*" narrowed by the resource-identifier condition, as upstream.
        iam.PolicyStatement(
            sid="AllowZonalShiftStatusReadOnly",
            actions=["arc-zonal-shift:GetManagedResource"],
            resources=["*"],
            conditions={"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        ),
    ]
