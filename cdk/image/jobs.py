"""The asynchronous jobs' AWS resources: one KMS key, the SQS queue and its dead-letter queue, the
SNS topic announcing finished jobs, and the results bucket whose `jobs/` prefix expires.

Every serving pod submits to and consumes from the one queue; `pod_statements` is all a pod may do
with these resources, and `scaler_statement` all KEDA's operator may (read the queue's depth).
The service counts a job's attempts itself (a pod's hand-back at SIGTERM is a receive, not an
attempt), so the queue's maxReceiveCount is only a safety net, far above jobsMaxReceives; the pods
fail and announce whatever reaches the dead-letter queue, then delete it.
IAM action names checked against cfn-lint 1.58.0's data/AdditionalSpecs/Policies.json; the
kms:ViaService condition key against the AWS KMS developer guide, "Condition keys for AWS KMS".
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdk.config.serving import JobsConfig
from cdk.retention import data_removal_policy
from cdk.serving.model_store import log_server_access

JOBS_PREFIX: Final = "jobs/"  # the service's JOBS_PREFIX: records, images and idempotency keys
SERVER_ACCESS_LOG_PREFIX: Final = "s3-access/jobs/"
DLQ_RETENTION: Final = Duration.days(14)  # the SQS maximum: dead letters wait there for a pod to settle them
LONG_POLL: Final = Duration.seconds(20)  # the SQS maximum ReceiveMessage wait
# Deliveries of one message before SQS dead-letters it: every hand-back (rolling update, scale-in,
# Spot reclaim) and every dead pod's job is one, so at least 100, and ten per attempt. SQS takes
# 1 to 1000 (SQS API reference, SetQueueAttributes: RedrivePolicy maxReceiveCount).
QUEUE_MAX_RECEIVES_FLOOR: Final = 100
RECEIVES_PER_ATTEMPT: Final = 10
SQS_MAX_RECEIVE_COUNT: Final = 1000


def queue_max_receives(config: JobsConfig) -> int:
    """The redrive policy's maxReceiveCount (and the pods' JOBS_QUEUE_MAX_RECEIVES) for `config`."""
    return min(SQS_MAX_RECEIVE_COUNT, max(QUEUE_MAX_RECEIVES_FLOOR, RECEIVES_PER_ATTEMPT * config.max_receives))


class JobsInfra(Construct):
    """Queue, dead-letter queue, topic and results bucket, all encrypted with one rotating key."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: JobsConfig, log_bucket: s3.IBucket, retain: bool
    ) -> None:
        super().__init__(scope, construct_id)
        removal = data_removal_policy(retain)
        self.config = config
        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the Stable Diffusion job queue, its dead-letter queue, topic and results",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        # A job never outlives its record: messages expire no later than the results (SQS keeps 14 days at most).
        retention = Duration.days(min(config.result_retention_days, 14))
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(config.visibility_s),
            retention_period=retention,
            receive_message_wait_time=LONG_POLL,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=queue_max_receives(config)
            ),
        )
        self.topic = sns.Topic(
            self, "Finished", display_name="Stable Diffusion jobs finished", master_key=self.key, enforce_ssl=True
        )
        self.bucket = s3.Bucket(
            self,
            "Results",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,  # one data key per bucket and period instead of a KMS call per object
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    prefix=JOBS_PREFIX,
                    expiration=Duration.days(config.result_retention_days),
                    noncurrent_version_expiration=Duration.days(1),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal,
        )
        log_server_access(self.bucket, log_bucket, SERVER_ACCESS_LOG_PREFIX)

    def pod_statements(self) -> list[iam.PolicyStatement]:
        """What a serving pod may do: submit and consume its queue, settle its dead letters, read/write
        `jobs/`, announce, use the key only through those three services."""
        stack = Stack.of(self)
        via = [f"{service}.{stack.region}.{stack.url_suffix}" for service in ("sqs", "s3", "sns")]
        return [
            iam.PolicyStatement(
                sid="SubmitAndConsumeJobs",
                actions=[
                    "sqs:SendMessage",
                    "sqs:ReceiveMessage",
                    "sqs:ChangeMessageVisibility",
                    "sqs:DeleteMessage",
                ],
                resources=[self.queue.queue_arn],
            ),
            # A dead letter's job is failed and announced, then the message is deleted.
            iam.PolicyStatement(
                sid="SettleDeadLetters",
                actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                resources=[self.dead_letters.queue_arn],
            ),
            iam.PolicyStatement(
                sid="ReadWriteJobResults",
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[self.bucket.arn_for_objects(f"{JOBS_PREFIX}*")],
            ),
            # Without ListBucket a missing record reads as 403 instead of 404.
            iam.PolicyStatement(
                sid="ListJobResults",
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{JOBS_PREFIX}*"]}},
            ),
            iam.PolicyStatement(sid="AnnounceFinishedJobs", actions=["sns:Publish"], resources=[self.topic.topic_arn]),
            iam.PolicyStatement(
                sid="UseJobsKeyThroughItsServices",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": via}},
            ),
        ]

    def scaler_statement(self) -> iam.PolicyStatement:
        """What KEDA's aws-sqs-queue scaler calls (GetQueueAttributes, per kedacore/keda v2.20.1
        pkg/scalers/aws_sqs_queue_scaler.go), on this queue only."""
        return iam.PolicyStatement(
            sid="ReadJobQueueDepth", actions=["sqs:GetQueueAttributes"], resources=[self.queue.queue_arn]
        )

    def service_env(self) -> list[dict[str, str]]:
        """The service's JOBS_* settings (app/settings.py) for a pod on AWS."""
        cfg = self.config
        return [
            {"name": "JOBS", "value": "aws"},
            {"name": "JOBS_QUEUE_URL", "value": self.queue.queue_url},
            {"name": "JOBS_DEAD_LETTER_URL", "value": self.dead_letters.queue_url},
            {"name": "JOBS_BUCKET", "value": self.bucket.bucket_name},
            {"name": "JOBS_PREFIX", "value": JOBS_PREFIX},
            {"name": "JOBS_TOPIC_ARN", "value": self.topic.topic_arn},
            {"name": "JOBS_MAX_RECEIVES", "value": str(cfg.max_receives)},
            {"name": "JOBS_QUEUE_MAX_RECEIVES", "value": str(queue_max_receives(cfg))},
            {"name": "JOBS_VISIBILITY_S", "value": str(cfg.visibility_s)},
            {"name": "JOBS_CONCURRENCY", "value": str(cfg.concurrency)},
            {"name": "JOBS_URL_TTL_S", "value": str(cfg.image_url_s)},
        ]
