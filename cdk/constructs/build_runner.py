"""The "run these CodeBuild builds during the deploy and wait for them" custom-resource provider.

Its handlers are lambdas/codebuild_runner.py; the service images (Custom::ImageBuilds) and the
weights staging (Custom::ModelStaging) each get one, built here so both have the same handlers,
grants, log encryption, waits (cdk/deploy_limits.py) and cdk-nag acknowledgements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import versions
from cdk.constructs.log_groups import encrypted_log_group
from cdk.nag import acknowledge_build_runner

LAMBDAS_DIR: Final = Path(__file__).resolve().parents[2] / "lambdas"
# The prerequisite check's handler has an asset of its own (cdk/constructs/prerequisite_checks.py), so the other
# handlers' code, and a default deploy, stay as they were without it.
LAMBDA_EXCLUDES: Final = ["__pycache__", "*.pyc", "prerequisite_check.py"]


@dataclass(frozen=True)
class BuildRunner:
    """The two handlers and the provider whose service token a CustomResource takes."""

    on_event: lambda_.Function
    is_complete: lambda_.Function
    provider: cr.Provider


def build_runner(
    scope: Construct,
    *,
    projects: Sequence[codebuild.Project],
    what: str,
    wait: Duration,
    report_after: Duration | None = None,
    repository: ecr.IRepository | None = None,
) -> BuildRunner:
    """Handlers allowed to start and poll exactly `projects`, under a provider that waits `wait`.

    With `report_after`, the poller stops waiting that long after its resource's start (then the next
    wait resource of a chain takes over, or the last one says which builds are still running). With
    `repository`, the starter may look up images already pushed there and builds of the projects
    already making them, so that nothing is built twice.
    """
    props = {
        "runtime": lambda_.Runtime(versions.LAMBDA_PYTHON_RUNTIME, lambda_.RuntimeFamily.PYTHON),
        "code": lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=LAMBDA_EXCLUDES),
        "timeout": Duration.minutes(1),
        "memory_size": 256,
        # A log group of the stack's own: Lambda's default one (/aws/lambda/<name>) would outlive the
        # stack, and a rolled-back first create (cdk/retention.py).
        "log_group": encrypted_log_group(scope, "HandlerLogs"),
    }
    on_event = lambda_.Function(
        scope, "OnEvent", handler="codebuild_runner.on_event", description=f"Starts {what}", **props
    )
    is_complete = lambda_.Function(
        scope, "IsComplete", handler="codebuild_runner.is_complete", description=f"Polls {what}", **props
    )
    arns = [p.project_arn for p in projects]
    on_event.add_to_role_policy(iam.PolicyStatement(actions=["codebuild:StartBuild"], resources=arns))
    if repository is not None:
        # Both act on the project ARN (CodeBuild User Guide, permissions reference).
        on_event.add_to_role_policy(
            iam.PolicyStatement(actions=["codebuild:ListBuildsForProject", "codebuild:BatchGetBuilds"], resources=arns)
        )
        repository.grant(on_event, "ecr:DescribeImages")
    is_complete.add_to_role_policy(iam.PolicyStatement(actions=["codebuild:BatchGetBuilds"], resources=arns))
    if report_after is not None:
        is_complete.add_environment("REPORT_AFTER_SECONDS", str(int(report_after.to_seconds())))
    provider = cr.Provider(
        scope,
        "Provider",
        on_event_handler=on_event,
        is_complete_handler=is_complete,
        query_interval=Duration.seconds(30),
        total_timeout=wait,
        log_group=encrypted_log_group(scope, "ProviderLogs"),
        waiter_state_machine_log_options=cr.LogOptions(destination=encrypted_log_group(scope, "WaiterLogs")),
    )
    acknowledge_build_runner(on_event, is_complete, provider, list(projects))
    return BuildRunner(on_event, is_complete, provider)
