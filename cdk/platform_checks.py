"""Checks on every synth: cdk-nag's AwsSolutionsChecks with the platform's acknowledgements, and our own where
cdk-nag is blind (it does not see aws_eks_v2 clusters: endpoint access and control-plane logging).
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from cdk.constructs.node_role import WORKER_NODE_POLICIES
from cdk.nag import (
    LAMBDA_BASIC_REASON,
    MANAGED_POLICY,
    NODE_POLICIES_REASON,
    acknowledge,
    acknowledge_aws_custom_resource_provider,
    logical_id,
    region_and_account,
)
from cdk.platform_stacks import PlatformStacks
from cdk.stacks.cluster_additions_stack import ClusterAdditionsStack
from cdk.stacks.cluster_stack import ClusterStack

REQUIRED_LOG_TYPES = frozenset({"api", "audit", "authenticator"})


def cluster_problems(cluster: eks_l1.CfnCluster) -> list[str]:
    """What is wrong with an AWS::EKS::Cluster's logging and endpoint access (empty when nothing)."""
    stack = cdk.Stack.of(cluster)
    problems = []
    logging = stack.resolve(cluster.logging) or {}
    enabled = set()
    for entry in (logging.get("clusterLogging") or {}).get("enabledTypes") or []:
        enabled.add(entry.get("type"))
    missing = REQUIRED_LOG_TYPES - enabled
    if missing:
        problems.append(f"control-plane logging misses {sorted(missing)}")
    vpc = stack.resolve(cluster.resources_vpc_config) or {}
    if not vpc.get("endpointPrivateAccess"):
        problems.append("the private API endpoint is off: nodes would reach the API over the internet")
    if vpc.get("endpointPublicAccess", True):
        cidrs = vpc.get("publicAccessCidrs") or []
        if not cidrs or "0.0.0.0/0" in cidrs:
            problems.append("the public API endpoint is open to 0.0.0.0/0: restrict endpointPublicCidrs")
    return problems


@jsii.implements(cdk.IAspect)
class EksClusterChecks:
    """Errors (which fail `cdk synth`) for an EKS cluster without logging or with an open endpoint."""

    def visit(self, node: IConstruct) -> None:
        """Check every AWS::EKS::Cluster in the tree."""
        if isinstance(node, eks_l1.CfnCluster):
            for problem in cluster_problems(node):
                cdk.Annotations.of(node).add_error(f"[EksClusterChecks] {problem}")


def add_nag_checks(app: cdk.App, platform: PlatformStacks) -> None:
    """Register cdk-nag and our own checks on the app, with the platform's acknowledgements."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    cdk.Aspects.of(app).add(EksClusterChecks())
    acknowledge_platform(platform)


def acknowledge_platform(platform: PlatformStacks) -> None:
    """The platform's acknowledged findings, each with its reason."""
    _acknowledge_cluster(platform)
    _acknowledge_images(platform)


def _acknowledge_cluster(platform: PlatformStacks) -> None:
    stack = platform.cluster
    if isinstance(stack, ClusterAdditionsStack):
        # Its kubectl handler runs as the team's imported role: only the provider framework's findings are ours.
        _acknowledge_kubectl_provider(stack.kubectl_provider, own_role=False)
        _acknowledge_add_ons(stack)
        return
    cluster = stack.cluster
    acknowledge(
        cluster.role,
        f"IAM4[{MANAGED_POLICY}AmazonEKSClusterPolicy]",
        "EKS requires this AWS-managed policy on the cluster role",
    )

    # aws_eks_v2's kubectl provider: CDK-owned Lambda and provider framework.
    _acknowledge_kubectl_provider(cluster.node.find_child("KubectlProvider"), own_role=True)

    node_roles = [stack.system_node_role]
    if stack.node_groups is not None:
        node_roles.append(stack.node_groups.node_role)
    for role in node_roles:
        for policy in WORKER_NODE_POLICIES:
            acknowledge(role, f"IAM4[{MANAGED_POLICY}{policy}]", NODE_POLICIES_REASON)
    _acknowledge_add_ons(stack)


def _acknowledge_kubectl_provider(provider: IConstruct, *, own_role: bool) -> None:
    """aws_eks_v2's kubectl provider: CDK-owned Lambda and provider framework; `own_role`: the handler's role is
    the one CDK makes (not a team's imported role), with its registry read policies."""
    handler = provider.node.find_child("Handler")
    kubectl_reasons = {
        "IAM4[" + MANAGED_POLICY + "service-role/AWSLambdaBasicExecutionRole]": LAMBDA_BASIC_REASON,
        "IAM4[" + MANAGED_POLICY + "service-role/AWSLambdaVPCAccessExecutionRole]": (
            "the kubectl handler may run in the VPC (private endpoint); this policy only manages its ENIs"
        ),
    }
    for rule, reason in kubectl_reasons.items():
        acknowledge(provider, rule, reason)
    if own_role:
        acknowledge(
            handler,
            f"IAM4[{MANAGED_POLICY}AmazonEC2ContainerRegistryReadOnly]",
            "the kubectl handler pulls Helm charts from ECR OCI registries; read-only",
        )
        acknowledge(
            handler,
            'IAM4[Policy::{"Fn::If":["' + _ecr_public_condition(handler) + '",{"Fn::Join":["",["arn:",{"Ref":'
            '"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]',
            "the kubectl handler pulls the Karpenter and Neuron charts from public ECR; read-only",
        )
    acknowledge(handler, "L1", "CDK pins the kubectl handler's runtime to the one its kubectl layer is built for")
    acknowledge(
        provider,
        f"IAM5[Resource::<{logical_id(handler)}.Arn>:*]",
        "the provider framework invokes any version of the kubectl handler function it owns",
    )


def _acknowledge_add_ons(stack: ClusterStack | ClusterAdditionsStack) -> None:
    """The add-ons' findings: on our own cluster, or those installed on a team's (None where expected)."""
    if stack.karpenter is not None:
        acknowledge(
            stack.karpenter.node_role,
            f"IAM4[{MANAGED_POLICY}AmazonSSMManagedInstanceCore]",
            "Session Manager access to accelerated nodes for debugging drivers, instead of SSH keys",
        )
        for policy in WORKER_NODE_POLICIES:
            acknowledge(stack.karpenter.node_role, f"IAM4[{MANAGED_POLICY}{policy}]", NODE_POLICIES_REASON)
        acknowledge(
            stack.karpenter.queue,
            "SQS3",
            "Interruption notices are only useful within minutes (5-minute retention); a DLQ would "
            "keep stale notices nobody acts on",
        )
        controller = stack.karpenter.controller_role
        region, _ = region_and_account(controller)
        ec2 = f"arn:<AWS::Partition>:ec2:{region}:"
        for resource in ("image/*", "snapshot/*"):
            acknowledge(
                controller,
                f"IAM5[Resource::{ec2}:{resource}]",
                "Karpenter launches from the AMIs/snapshots its EC2NodeClass selects; AMI ids change "
                "with every release so they cannot be listed (Karpenter's documented policy)",
            )
        for resource in ("security-group/*", "subnet/*", "capacity-reservation/*", "placement-group/*"):
            acknowledge(
                controller,
                f"IAM5[Resource::{ec2}*:{resource}]",
                "RunInstances/CreateFleet must reference the selected subnets, security groups, capacity "
                "reservations and placement groups, which may be shared from another account (a shared "
                "VPC); limited to this region (Karpenter v1.14.1's published policy)",
            )
        for resource in (
            "launch-template/*",
            "fleet/*",
            "instance/*",
            "volume/*",
            "network-interface/*",
            "spot-instances-request/*",
        ):
            acknowledge(
                controller,
                f"IAM5[Resource::{ec2}<AWS::AccountId>:{resource}]",
                "resources Karpenter creates have ids unknown in advance; every statement on them is "
                "conditioned on this cluster's kubernetes.io/cluster tag and a karpenter.sh/nodepool tag",
            )
        acknowledge(
            controller,
            "IAM5[Resource::*]",
            "ec2:Describe*, pricing:GetProducts and iam:ListInstanceProfiles support no resource-level "
            "permissions (AWS Service Authorization Reference); the Describe statement is limited to this "
            "region, and arc-zonal-shift:GetManagedResource to this cluster by its resource-identifier "
            "condition (Karpenter v1.14.1's published policy)",
        )
        acknowledge(
            controller,
            "IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*]",
            "read-only: the EC2NodeClass finalizer reads the instance profiles Karpenter may have made "
            "(a legacy name among them) before it lets the node class go (Karpenter v1.14.1's policy)",
        )
        acknowledge(
            controller,
            f"IAM5[Resource::arn:<AWS::Partition>:ssm:{region}::parameter/aws/service/*]",
            "reads the public AWS-owned AMI parameters that resolve the pinned al2023 alias",
        )
    acknowledge_aws_custom_resource_provider(stack)
    if stack.load_balancer_controller is not None:
        _acknowledge_load_balancer_controller(stack.load_balancer_controller.identity.role)
    if stack.keda is not None:
        acknowledge(
            stack.keda.operator_role,
            "IAM5[Resource::*]",
            "cloudwatch:GetMetricData/GetMetricStatistics/ListMetrics support no resource-level permissions "
            "(AWS Service Authorization Reference); read-only",
        )
    if stack.cloudwatch is not None:
        acknowledge(
            stack.cloudwatch.agent_role,
            f"IAM4[{MANAGED_POLICY}CloudWatchAgentServerPolicy]",
            "the policy AWS documents for the amazon-cloudwatch-observability add-on's agent",
        )


def _acknowledge_load_balancer_controller(alb_role: iam.IRole) -> None:
    acknowledge(
        alb_role,
        "IAM5[Resource::*]",
        "the AWS Load Balancer Controller's published IAM policy (shipped with aws-cdk-lib for this "
        "release): Describe* calls support no resource-level permissions, writes are tag-conditioned",
    )
    elb = "arn:<AWS::Partition>:elasticloadbalancing:*:*:"
    for resource in (
        "arn:<AWS::Partition>:ec2:*:*:security-group/*",
        elb + "targetgroup/*/*",
        elb + "loadbalancer/net/*/*",
        elb + "loadbalancer/app/*/*",
        elb + "listener/net/*/*/*",
        elb + "listener/app/*/*/*",
        elb + "listener-rule/net/*/*/*",
        elb + "listener-rule/app/*/*/*",
    ):
        acknowledge(
            alb_role,
            f"IAM5[Resource::{resource}]",
            "the controller's published policy: load balancers, listeners and target groups it creates "
            "have generated names; writes are conditioned on the elbv2.k8s.aws/cluster tag",
        )


def _ecr_public_condition(handler: IConstruct) -> str:
    """The logical id of the kubectl handler's 'has public ECR' condition (named by aws_eks_v2)."""
    for child in handler.node.scope.node.find_all():
        if isinstance(child, cdk.CfnCondition) and child.node.id.startswith("HasEcrPublic"):
            return cdk.Stack.of(child).resolve(cdk.Stack.of(child).get_logical_id(child))
    raise LookupError("kubectl handler has no HasEcrPublic condition")


def _acknowledge_images(platform: PlatformStacks) -> None:
    builds = platform.images.builds
    projects = [*builds.projects.values(), *builds.small_projects.values()]
    for project in projects:
        acknowledge(
            project,
            "IAM5[Resource::*]",
            "ecr:GetAuthorizationToken supports no resource-level permissions (docker login)",
        )
