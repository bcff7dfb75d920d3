"""The model store bucket (weights and Neuron artifacts) and the log bucket beside it."""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, Duration, Stack, Token, Validations, region_info
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.checkov import skip_cfn_child
from cdk.retention import data_removal_policy

SERVER_ACCESS_LOG_PREFIX = "s3-access/model-store/"
ACCESS_LOG_PREFIX: Final = "alb"  # the ALB's access logs (the front door's Ingress writes them here)
ELB_LOG_DELIVERY_SERVICE = "logdelivery.elasticloadbalancing.amazonaws.com"


def elb_log_delivery_principal(region: str) -> iam.IPrincipal:
    """Who writes ALB access logs in `region`: the regional ELB account in regions opened before
    August 2022, the log-delivery service principal in newer ones.

    The same choice aws-cdk-lib makes for its own load balancers (v2.275.0,
    aws-elasticloadbalancingv2/lib/shared/base-load-balancer.ts `resourcePolicyPrincipal`), from its
    region facts (`RegionInfo.elbv2Account`), so no table is kept here. A region-agnostic stack
    cannot know which, hence the error rather than a guess.
    """
    if Token.is_unresolved(region):
        raise ValueError("ALB access logs need a stack with an explicit region (see cdk/config/environment.py)")
    account = region_info.RegionInfo.get(region).elbv2_account
    return iam.AccountPrincipal(account) if account else iam.ServicePrincipal(ELB_LOG_DELIVERY_SERVICE)


def log_server_access(bucket: s3.Bucket, log_bucket: s3.IBucket, prefix: str) -> None:
    """S3 server access logs of `bucket` into `log_bucket` under `prefix`, granted by bucket policy.

    `server_access_logs_bucket` would add a LogDeliveryWrite ACL unless a feature flag is set;
    the policy form works the same whatever the app's flags are.
    """
    cfn_bucket = bucket.node.default_child
    assert isinstance(cfn_bucket, s3.CfnBucket)
    cfn_bucket.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
        destination_bucket_name=log_bucket.bucket_name, log_file_prefix=prefix
    )
    log_bucket.add_to_resource_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
            resources=[log_bucket.arn_for_objects(f"{prefix}*")],
            conditions={
                "ArnLike": {"aws:SourceArn": bucket.bucket_arn},
                "StringEquals": {"aws:SourceAccount": Stack.of(bucket).account},
            },
        )
    )


class ModelStore(Construct):
    """An encrypted, versioned, TLS-only, private bucket, plus a log bucket for S3 and ALB access logs."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        removal = data_removal_policy(retain)
        # ALB access logs only support SSE-S3, so the log bucket uses S3-managed keys.
        self.log_bucket = s3.Bucket(
            self,
            "Logs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=Duration.days(90), noncurrent_version_expiration=Duration.days(30))
            ],
            removal_policy=removal,
        )
        Validations.of(self.log_bucket).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="This is the access-log bucket itself; logging it into itself would loop.",
            )
        )
        skip_cfn_child(
            self.log_bucket, {"CKV_AWS_18": "This is the access-log bucket itself; logging it into itself would loop."}
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30))],
            removal_policy=removal,
        )
        log_server_access(self.bucket, self.log_bucket, SERVER_ACCESS_LOG_PREFIX)
        self._allow_alb_access_logs()

    def _allow_alb_access_logs(self) -> None:
        """Let the ALB write its access logs under `alb/AWSLogs/<account>/`."""
        stack = Stack.of(self)
        self.log_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                principals=[elb_log_delivery_principal(stack.region)],
                resources=[self.log_bucket.arn_for_objects(f"{ACCESS_LOG_PREFIX}/AWSLogs/{stack.account}/*")],
            )
        )
