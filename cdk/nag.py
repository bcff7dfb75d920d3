"""The acknowledgement kit for cdk-nag's AwsSolutionsChecks: every acknowledgement names the finding exactly
(cdk-nag v3 has no blanket suppressions) and says why it is acceptable here. Constructs acknowledge their own
findings with these; cdk/platform_checks.py registers the checks on the app.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import custom_resources as cr
from constructs import IConstruct

PACK = "AwsSolutions"
MANAGED_POLICY = "Policy::arn:<AWS::Partition>:iam::aws:policy/"
NODE_POLICIES_REASON = (
    "AWS-managed policies that EKS documents as required for worker nodes (kubelet, VPC CNI, image "
    "pulls); AWS keeps them current with new EKS features"
)
LAMBDA_BASIC_REASON = (
    "AWSLambdaBasicExecutionRole only grants writing the function's own CloudWatch logs; it is what "
    "the CDK provider framework attaches"
)


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one exact finding on a construct (and its children)."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{PACK}::{PACK}-{rule}", reason=reason))


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of an L2's resource, as cdk-nag prints it in finding ids."""
    resource = construct.node.default_child if not isinstance(construct, cdk.CfnElement) else construct
    return cdk.Stack.of(construct).resolve(cdk.Stack.of(construct).get_logical_id(resource))


def acknowledge_aws_custom_resource_provider(stack: cdk.Stack) -> None:
    """The stack's AwsCustomResource function (a CDK singleton), acknowledged where it lives."""
    provider = stack.node.try_find_child("AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
    if provider is None:
        return
    acknowledge(provider, f"IAM4[{MANAGED_POLICY}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    function = provider.node.default_child
    if isinstance(function, cdk.CfnResource):
        # CDK's singleton adds a DependsOn on its role that the Role reference already implies.
        function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


def region_and_account(construct: IConstruct) -> tuple[str, str]:
    """Region and account as cdk-nag prints them: literal in an env-specific stack, else pseudo refs."""
    stack = cdk.Stack.of(construct)
    region = "<AWS::Region>" if cdk.Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if cdk.Token.is_unresolved(stack.account) else stack.account
    return region, account


def acknowledge_bucket_emptier(handler: IConstruct, provider: IConstruct, buckets: list[IConstruct]) -> None:
    """The findings of the empty-on-create-rollback custom resource (lambdas/empty_on_create_rollback.py)."""
    for scope in (handler, provider):
        acknowledge(scope, f"IAM4[{MANAGED_POLICY}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    acknowledge(
        handler,
        "L1",
        "pinned to Python 3.13 on purpose: the handler is tested against that runtime's boto3; "
        "bumped with the versions module",
    )
    acknowledge(
        provider,
        f"IAM5[Resource::<{logical_id(handler)}.Arn>:*]",
        "the provider framework invokes any version of the handler function it owns",
    )
    for bucket in buckets:
        acknowledge(
            handler,
            f"IAM5[Resource::<{logical_id(bucket)}.Arn>/*]",
            "deletes the object versions of this bucket only, and only while its first create rolls back",
        )


def acknowledge_prerequisite_checks(handler: IConstruct, provider: IConstruct) -> None:
    """The findings of the deploy-time prerequisite check (lambdas/prerequisite_check.py); its handler runs as the
    team's imported kubectl role, which carries no finding of ours."""
    acknowledge(provider, f"IAM4[{MANAGED_POLICY}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    acknowledge(
        handler,
        "L1",
        "pinned to Python 3.13 on purpose: the handler is tested against that runtime's boto3; "
        "bumped with the versions module",
    )
    acknowledge(
        provider,
        f"IAM5[Resource::<{logical_id(handler)}.Arn>:*]",
        "the provider framework invokes any version of the handler function it owns",
    )


def acknowledge_build_runner(
    on_event: IConstruct, is_complete: IConstruct, provider: IConstruct, projects: list[IConstruct]
) -> None:
    """The findings of a "run CodeBuild builds and wait" custom resource (lambdas/codebuild_runner.py):
    its two handlers, the provider framework around them, and the CodeBuild projects' CDK grants."""
    for function in (on_event, is_complete):
        acknowledge(function, f"IAM4[{MANAGED_POLICY}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
        acknowledge(
            function,
            "L1",
            "pinned to Python 3.13 on purpose: the handler is tested against that runtime's boto3; "
            "bumped with the versions module",
        )
    acknowledge(provider, f"IAM4[{MANAGED_POLICY}service-role/AWSLambdaBasicExecutionRole]", LAMBDA_BASIC_REASON)
    for function in (on_event, is_complete):
        acknowledge(
            provider,
            f"IAM5[Resource::<{logical_id(function)}.Arn>:*]",
            "the provider framework invokes any version of the handler functions it owns",
        )
    for child in ("framework-isComplete", "framework-onTimeout"):
        acknowledge(
            provider,
            f"IAM5[Resource::<{logical_id(provider.node.find_child(child))}.Arn>:*]",
            "the waiter state machine invokes any version of the provider framework's own functions",
        )
    acknowledge(
        provider,
        "SF1",
        "the provider framework's waiter logs its executions (ERROR level) to its own log group; "
        "ALL would log every 30-second poll",
    )
    acknowledge(provider, "SF2", "the waiter only loops over the is-complete Lambda; X-Ray adds nothing there")
    for project in projects:
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*"):
            acknowledge(project, f"IAM5[Action::{action}]", "CDK's read grant on the build's source asset object only")
        for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
            acknowledge(project, f"IAM5[Action::{action}]", "CDK's grant on the build's own artifacts key only")
        logical = logical_id(project)
        region, account = region_and_account(project)
        acknowledge(
            project,
            f"IAM5[Resource::arn:<AWS::Partition>:logs:{region}:{account}:log-group:/aws/codebuild/<{logical}>:*]",
            "CodeBuild's default log group of this project only (log streams are named per build)",
        )
        acknowledge(
            project,
            f"IAM5[Resource::arn:<AWS::Partition>:codebuild:{region}:{account}:report-group/<{logical}>-*]",
            "CodeBuild's report groups of this project only (named after it)",
        )
