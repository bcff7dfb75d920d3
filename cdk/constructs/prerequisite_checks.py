"""The deploy-time check of the prerequisites a team's cluster is expected to run (lambdas/prerequisite_check.py).

One custom resource per prerequisite set to `expect` (cdk/prerequisites.py), none for those we install. Each reads
its objects from the cluster's Kubernetes API during `cdk deploy` and fails the additions stack with one line
naming what is missing and the setting that installs ours, so the serving stack, which depends on this stack,
applies nothing. The handler runs as the team's kubectl role in the cluster's private subnets and security group,
like the kubectl handler (cdk/stacks/cluster_additions_stack.py): it reaches a private endpoint, and the role's
cluster-admin access entry lets it read; no access entry changes for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import versions
from cdk.constructs.build_runner import LAMBDAS_DIR
from cdk.constructs.log_groups import encrypted_log_group
from cdk.nag import acknowledge_prerequisite_checks
from cdk.prerequisites import BY_NAME

RESOURCE_TYPE: Final = "Custom::Prerequisite"
HANDLER_FILE: Final = "prerequisite_check.py"
# A handful of GETs; the API answers in well under a second, a cold start in the VPC takes a few.
HANDLER_TIMEOUT: Final = Duration.minutes(2)


class PrerequisiteChecks(Construct):
    """A check per expected prerequisite; `checks` maps its short name to its custom resource."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        expected: Sequence[str],
        role: iam.IRole,
        vpc: ec2.IVpc,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        handler = lambda_.Function(
            self,
            "OnEvent",
            runtime=lambda_.Runtime(versions.LAMBDA_PYTHON_RUNTIME, lambda_.RuntimeFamily.PYTHON),
            code=lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=["*", f"!{HANDLER_FILE}"]),  # its own file only
            handler=f"{HANDLER_FILE.removesuffix('.py')}.on_event",
            description=f"Checks the prerequisites expected on {cluster_name} before anything is applied",
            timeout=HANDLER_TIMEOUT,
            memory_size=256,
            role=role,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=vpc.private_subnets),
            security_groups=[security_group],
            log_group=encrypted_log_group(self, "OnEventLogs"),  # not Lambda's default, which outlives the stack
        )
        provider = cr.Provider(
            self, "Provider", on_event_handler=handler, log_group=encrypted_log_group(self, "ProviderLogs")
        )
        acknowledge_prerequisite_checks(handler, provider)
        self.checks: dict[str, CustomResource] = {
            name: CustomResource(
                self,
                BY_NAME[name].setting,  # the construct id says which setting installs ours instead
                service_token=provider.service_token,
                resource_type=RESOURCE_TYPE,
                properties=BY_NAME[name].check_properties(cluster_name),
            )
            for name in expected
        }
