"""Empties buckets when the stack operation that created them rolls back (lambdas/empty_on_create_rollback.py).

The buckets are RetainExceptOnCreate (cdk/retention.py), but CloudFormation cannot delete a bucket
that holds objects, and a failed first deploy may already have written some (staged weights, access
logs). The custom resource refers to the buckets, so a rollback deletes it before them. The log
bucket keeps receiving access logs for a while (the ALB's last file, late S3 server access logs): the
handler empties it last, until it has stayed empty for LOG_QUIET.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, CustomResource, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import versions
from cdk.constructs.build_runner import LAMBDA_EXCLUDES, LAMBDAS_DIR
from cdk.constructs.log_groups import encrypted_log_group
from cdk.nag import acknowledge_bucket_emptier

# The ALB writes an access-log file every 5 minutes: the log bucket must stay empty for longer than that.
LOG_QUIET = Duration.minutes(6)
LOG_POLL = Duration.seconds(30)
# The provider framework's onEvent Lambda waits at most 15 minutes (Lambda's maximum) for this handler,
# which must answer before that, its waits bounded by its own remaining time.
HANDLER_TIMEOUT = Duration.minutes(14)


class EmptyOnCreateRollback(Construct):
    """A custom resource whose Delete, during a create rollback only, empties `buckets`, then `log_bucket`.

    `buckets` are the data buckets: their S3 server access logging (into `log_bucket`) is turned off first.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, buckets: Sequence[s3.IBucket], log_bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        every_bucket = [*buckets, log_bucket]
        handler = lambda_.Function(
            self,
            "OnEvent",
            runtime=lambda_.Runtime(versions.LAMBDA_PYTHON_RUNTIME, lambda_.RuntimeFamily.PYTHON),
            code=lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=LAMBDA_EXCLUDES),
            handler="empty_on_create_rollback.on_event",
            description="Empties the serving buckets when their first create rolls back",
            timeout=HANDLER_TIMEOUT,
            memory_size=256,
            log_group=encrypted_log_group(self, "OnEventLogs"),  # not Lambda's default, which outlives the stack
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[Aws.STACK_ID])
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:PutBucketLogging"], resources=[b.bucket_arn for b in buckets])
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucketVersions"], resources=[b.bucket_arn for b in every_bucket])
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:DeleteObjectVersion"], resources=[b.arn_for_objects("*") for b in every_bucket]
            )
        )
        provider = cr.Provider(
            self, "Provider", on_event_handler=handler, log_group=encrypted_log_group(self, "ProviderLogs")
        )
        acknowledge_bucket_emptier(handler, provider, every_bucket)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::EmptyOnCreateRollback",
            properties={
                "Buckets": [b.bucket_name for b in buckets],
                "LogBucket": log_bucket.bucket_name,
                "QuietSeconds": LOG_QUIET.to_seconds(),
                "PollSeconds": LOG_POLL.to_seconds(),
            },
        )
