"""CloudWatch log groups encrypted with one customer-managed KMS key per stack.

CloudWatch Logs encrypts at rest by default; a KMS key adds key-level access control and an audit
trail of every decrypt. The key policy follows "Encrypt log data in CloudWatch Logs using AWS KMS"
(docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html): the regional logs
service principal may use the key only for log groups of this account and region.
"""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk.retention import RETAINED

_KEY_ID = "LogsKey"


def logs_key(scope: Construct) -> kms.Key:
    """The stack's log-encryption key, created on first use."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(_KEY_ID)
    if isinstance(existing, kms.Key):
        return existing
    key = kms.Key(
        stack,
        _KEY_ID,
        description=f"Encrypts the CloudWatch log groups of {stack.stack_name}",
        enable_key_rotation=True,
        removal_policy=RETAINED,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsUseForThisAccountsLogGroups",
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
                    "log-group:*"
                }
            },
        )
    )
    return key


def encrypted_log_group(
    scope: Construct,
    construct_id: str,
    *,
    retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    removal_policy: RemovalPolicy = RETAINED,
) -> logs.LogGroup:
    """A log group encrypted with the stack's logs key."""
    return logs.LogGroup(
        scope,
        construct_id,
        retention=retention,
        encryption_key=logs_key(scope),
        removal_policy=removal_policy,
    )
