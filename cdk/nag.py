"""Checks on every synth: cdk-nag's AwsSolutionsChecks, and our own where cdk-nag is blind.

Every acknowledgement names the finding exactly (cdk-nag v3 has no blanket suppressions) and says
why it is acceptable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
import jsii
from aws_cdk import aws_eks as eks_l1
from aws_cdk import custom_resources as cr
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from cdk.constructs.node_role import WORKER_NODE_POLICIES

if TYPE_CHECKING:
    from cdk.build import PlatformStacks

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


PACK = "AwsSolutions"
_MANAGED = "Policy::arn:<AWS::Partition>:iam::aws:policy/"
NODE_POLICIES_REASON = (
    "AWS-managed policies that EKS documents as required for worker nodes (kubelet, VPC CNI, image "
    "pulls); AWS keeps them current with new EKS features"
)
LAMBDA_BASIC_REASON = (
    "AWSLambdaBasicExecutionRole only grants writing the function's own CloudWatch logs; it is what "
    "the CDK provider framework attaches"
)


def _ack(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one exact finding on a construct (and its children)."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{PACK}::{PACK}-{rule}", reason=reason))


def _logical(construct: IConstruct) -> str:
    """The CloudFormation logical id of an L2's resource, as cdk-nag prints it in finding ids."""
    resource = construct.node.default_child if not isinstance(construct, cdk.CfnElement) else construct
    return cdk.Stack.of(construct).resolve(cdk.Stack.of(construct).get_logical_id(resource))


def acknowledge_platform(platform: PlatformStacks) -> None:
    """The platform's acknowledged findings, each with its reason."""
    _acknowledge_cluster(platform)
    _acknowledge_images(platform)


def _acknowledge_cluster(platform: PlatformStacks) -> None:
    stack = platform.cluster
    cluster = stack.cluster
    _ack(
        cluster.role,
        f"IAM4[{_MANAGED}AmazonEKSClusterPolicy]",
        "EKS requires this AWS-managed policy on the cluster role",
    )

    # aws_eks_v2's kubectl provider: CDK-owned Lambda and provider framework.
    provider = cluster.node.find_child("KubectlProvider")
    handler = provider.node.find_child("Handler")
    kubectl_reasons = {
        "IAM4[" + _MANAGED + "service-role/AWSLambdaBasicExecutionRole]": LAMBDA_BASIC_REASON,
        "IAM4[" + _MANAGED + "service-role/AWSLambdaVPCAccessExecutionRole]": (
            "the kubectl handler may run in the VPC (private endpoint); this policy only manages its ENIs"
        ),
    }
    for rule, reason in kubectl_reasons.items():
        _ack(provider, rule, reason)
    _ack(
        handler,
        f"IAM4[{_MANAGED}AmazonEC2ContainerRegistryReadOnly]",
        "the kubectl handler pulls Helm charts from ECR OCI registries; read-only",
    )
    _ack(
        handler,
        'IAM4[Policy::{"Fn::If":["' + _ecr_public_condition(handler) + '",{"Fn::Join":["",["arn:",{"Ref":'
        '"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]',
        "the kubectl handler pulls the Karpenter and Neuron charts from public ECR; read-only",
    )
    _ack(handler, "L1", "CDK pins the kubectl handler's runtime to the one its kubectl layer is built for")
    _ack(
        provider,
        f"IAM5[Resource::<{_logical(handler)}.Arn>:*]",
        "the provider framework invokes any version of the kubectl handler function it owns",
    )

    node_roles = [stack.system_node_role]
    if stack.karpenter is not None:
        node_roles.append(stack.karpenter.node_role)
        _ack(
            stack.karpenter.node_role,
            f"IAM4[{_MANAGED}AmazonSSMManagedInstanceCore]",
            "Session Manager access to accelerated nodes for debugging drivers, instead of SSH keys",
        )
        _ack(
            stack.karpenter.queue,
            "SQS3",
            "Interruption notices are only useful within minutes (5-minute retention); a DLQ would "
            "keep stale notices nobody acts on",
        )
        controller = stack.karpenter.controller_role
        region, _ = _env(controller)
        ec2 = f"arn:<AWS::Partition>:ec2:{region}:"
        for resource in ("image/*", "snapshot/*"):
            _ack(
                controller,
                f"IAM5[Resource::{ec2}:{resource}]",
                "Karpenter launches from the AMIs/snapshots its EC2NodeClass selects; AMI ids change "
                "with every release so they cannot be listed (Karpenter's documented policy)",
            )
        for resource in ("security-group/*", "subnet/*", "capacity-reservation/*", "placement-group/*"):
            _ack(
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
            _ack(
                controller,
                f"IAM5[Resource::{ec2}<AWS::AccountId>:{resource}]",
                "resources Karpenter creates have ids unknown in advance; every statement on them is "
                "conditioned on this cluster's kubernetes.io/cluster tag and a karpenter.sh/nodepool tag",
            )
        _ack(
            controller,
            "IAM5[Resource::*]",
            "ec2:Describe*, pricing:GetProducts and iam:ListInstanceProfiles support no resource-level "
            "permissions (AWS Service Authorization Reference); the Describe statement is limited to this "
            "region, and arc-zonal-shift:GetManagedResource to this cluster by its resource-identifier "
            "condition (Karpenter v1.14.1's published policy)",
        )
        _ack(
            controller,
            "IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*]",
            "read-only: the EC2NodeClass finalizer reads the instance profiles Karpenter may have made "
            "(a legacy name among them) before it lets the node class go (Karpenter v1.14.1's policy)",
        )
        _ack(
            controller,
            f"IAM5[Resource::arn:<AWS::Partition>:ssm:{region}::parameter/aws/service/*]",
            "reads the public AWS-owned AMI parameters that resolve the pinned al2023 alias",
        )
    if stack.node_groups is not None:
        node_roles.append(stack.node_groups.node_role)
    for role in node_roles:
        for policy in WORKER_NODE_POLICIES:
            _ack(role, f"IAM4[{_MANAGED}{policy}]", NODE_POLICIES_REASON)

    acknowledge_aws_custom_resource_provider(stack)

    alb_role = stack.load_balancer_controller.node.find_child("alb-sa").node.find_child("Role")
    _ack(
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
        _ack(
            alb_role,
            f"IAM5[Resource::{resource}]",
            "the controller's published policy: load balancers, listeners and target groups it creates "
            "have generated names; writes are conditioned on the elbv2.k8s.aws/cluster tag",
        )
    _ack(
        stack.keda.operator_role,
        "IAM5[Resource::*]",
        "cloudwatch:GetMetricData/GetMetricStatistics/ListMetrics support no resource-level permissions "
        "(AWS Service Authorization Reference); read-only",
    )
    _ack(
        stack.cloudwatch.agent_role,
        f"IAM4[{_MANAGED}CloudWatchAgentServerPolicy]",
        "the policy AWS documents for the amazon-cloudwatch-observability add-on's agent",
    )


def acknowledge_aws_custom_resource_provider(stack: cdk.Stack) -> None:
    """The stack's AwsCustomResource function (a CDK singleton), acknowledged where it lives."""
    provider = stack.node.try_find_child("AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
    if provider is None:
        return
    _ack(provider, f"IAM4[{_MANAGED}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    function = provider.node.default_child
    if isinstance(function, cdk.CfnResource):
        # CDK's singleton adds a DependsOn on its role that the Role reference already implies.
        function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


def _ecr_public_condition(handler: IConstruct) -> str:
    """The logical id of the kubectl handler's 'has public ECR' condition (named by aws_eks_v2)."""
    for child in handler.node.scope.node.find_all():
        if isinstance(child, cdk.CfnCondition) and child.node.id.startswith("HasEcrPublic"):
            return cdk.Stack.of(child).resolve(cdk.Stack.of(child).get_logical_id(child))
    raise LookupError("kubectl handler has no HasEcrPublic condition")


def _env(construct: IConstruct) -> tuple[str, str]:
    """Region and account as cdk-nag prints them: literal in an env-specific stack, else pseudo refs."""
    stack = cdk.Stack.of(construct)
    region = "<AWS::Region>" if cdk.Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if cdk.Token.is_unresolved(stack.account) else stack.account
    return region, account


def _acknowledge_images(platform: PlatformStacks) -> None:
    builds = platform.images.builds
    projects = [*builds.projects.values(), *builds.small_projects.values()]
    for project in projects:
        _ack(
            project,
            "IAM5[Resource::*]",
            "ecr:GetAuthorizationToken supports no resource-level permissions (docker login)",
        )


def acknowledge_bucket_emptier(handler: IConstruct, provider: IConstruct, buckets: list[IConstruct]) -> None:
    """The findings of the empty-on-create-rollback custom resource (lambdas/empty_on_create_rollback.py)."""
    for scope in (handler, provider):
        _ack(scope, f"IAM4[{_MANAGED}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    _ack(
        handler,
        "L1",
        "pinned to Python 3.13 on purpose: the handler is tested against that runtime's boto3; "
        "bumped with the versions module",
    )
    _ack(
        provider,
        f"IAM5[Resource::<{_logical(handler)}.Arn>:*]",
        "the provider framework invokes any version of the handler function it owns",
    )
    for bucket in buckets:
        _ack(
            handler,
            f"IAM5[Resource::<{_logical(bucket)}.Arn>/*]",
            "deletes the object versions of this bucket only, and only while its first create rolls back",
        )


def acknowledge_build_runner(
    on_event: IConstruct, is_complete: IConstruct, provider: IConstruct, projects: list[IConstruct]
) -> None:
    """The findings of a "run CodeBuild builds and wait" custom resource (lambdas/codebuild_runner.py):
    its two handlers, the provider framework around them, and the CodeBuild projects' CDK grants."""
    for function in (on_event, is_complete):
        _ack(function, f"IAM4[{_MANAGED}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
        _ack(
            function,
            "L1",
            "pinned to Python 3.13 on purpose: the handler is tested against that runtime's boto3; "
            "bumped with the versions module",
        )
    _ack(provider, f"IAM4[{_MANAGED}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    for function in (on_event, is_complete):
        _ack(
            provider,
            f"IAM5[Resource::<{_logical(function)}.Arn>:*]",
            "the provider framework invokes any version of the handler functions it owns",
        )
    for child in ("framework-isComplete", "framework-onTimeout"):
        _ack(
            provider,
            f"IAM5[Resource::<{_logical(provider.node.find_child(child))}.Arn>:*]",
            "the waiter state machine invokes any version of the provider framework's own functions",
        )
    _ack(
        provider,
        "SF1",
        "the provider framework's waiter logs its executions (ERROR level) to its own log group; "
        "ALL would log every 30-second poll",
    )
    _ack(provider, "SF2", "the waiter only loops over the is-complete Lambda; X-Ray adds nothing there")
    for project in projects:
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*"):
            _ack(project, f"IAM5[Action::{action}]", "CDK's read grant on the build's source asset object only")
        for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
            _ack(project, f"IAM5[Action::{action}]", "CDK's grant on the build's own artifacts key only")
        logical = _logical(project)
        region, account = _env(project)
        _ack(
            project,
            f"IAM5[Resource::arn:<AWS::Partition>:logs:{region}:{account}:log-group:/aws/codebuild/<{logical}>:*]",
            "CodeBuild's default log group of this project only (log streams are named per build)",
        )
        _ack(
            project,
            f"IAM5[Resource::arn:<AWS::Partition>:codebuild:{region}:{account}:report-group/<{logical}>-*]",
            "CodeBuild's report groups of this project only (named after it)",
        )
