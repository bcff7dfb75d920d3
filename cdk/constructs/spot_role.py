"""The EC2 Spot service-linked role, made sure of during the deploy when some capacity is Spot.

EC2 launches Spot Instances through the AWSServiceRoleForEC2Spot service-linked role. The console
creates it on a first Spot request; an API caller (Karpenter's CreateFleet, a node group) must find
it already there (EC2 User Guide, "Service-linked role for Spot Instance requests"), or GPU Spot
launches fail with AuthFailure.ServiceLinkedRoleCreationNotPermitted on an account that never
used Spot. One role serves the whole account, so it is created if missing and never deleted:
other Spot users in the account may rely on it.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

SPOT_SERVICE: Final = "spot.amazonaws.com"
SPOT_ROLE_NAME: Final = "AWSServiceRoleForEC2Spot"
# IAM answers CreateServiceLinkedRole for a role that exists with error code InvalidInput ("Service
# role name AWSServiceRoleForEC2Spot has been taken in this account"); botocore 1.44's IAM model
# names the shape InvalidInputException, which is the error name the JavaScript SDK in the
# AwsCustomResource handler matches against. The call's only input is the constant service name,
# so no other invalid input can occur.
ROLE_EXISTS_ERROR: Final = r"^InvalidInput(Exception)?$"


class SpotServiceLinkedRole(Construct):
    """Creates AWSServiceRoleForEC2Spot unless the account already has it."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        role_arn = f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/aws-service-role/{SPOT_SERVICE}/{SPOT_ROLE_NAME}"
        create = cr.AwsSdkCall(
            service="IAM",
            action="createServiceLinkedRole",
            parameters={"AWSServiceName": SPOT_SERVICE},
            physical_resource_id=cr.PhysicalResourceId.of(SPOT_ROLE_NAME),
            ignore_error_codes_matching=ROLE_EXISTS_ERROR,
        )
        self.resource = cr.AwsCustomResource(
            self,
            "Resource",
            on_create=create,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=["iam:CreateServiceLinkedRole"],
                        resources=[role_arn],
                        conditions={"StringEquals": {"iam:AWSServiceName": SPOT_SERVICE}},
                    )
                ]
            ),
            install_latest_aws_sdk=False,
        )
