"""The IAM statements serving pods get through Pod Identity: one model-store prefix each, one metric namespace."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import IConstruct


def read_statements(bucket: s3.IBucket, prefixes: Sequence[str], *, sid_suffix: str = "") -> list[iam.PolicyStatement]:
    """s3:GetObject under the prefixes and s3:ListBucket limited to them, nothing else.

    `sid_suffix` keeps statement ids unique when one role reads from two buckets.
    """
    return [
        iam.PolicyStatement(
            sid="ReadModelPrefix" + sid_suffix,
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in prefixes],
        ),
        iam.PolicyStatement(
            sid="ListModelPrefix" + sid_suffix,
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
        ),
    ]


def write_statement(bucket: s3.IBucket, prefix: str) -> iam.PolicyStatement:
    """s3:PutObject under one prefix (no delete, no overwrite of other prefixes)."""
    return iam.PolicyStatement(
        sid="WriteCompiledPrefix", actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{prefix}*")]
    )


def put_metrics_statement(namespace: str) -> iam.PolicyStatement:
    """cloudwatch:PutMetricData for one namespace only (the action has no resource-level scoping)."""
    return iam.PolicyStatement(
        sid="PutServiceMetrics",
        actions=["cloudwatch:PutMetricData"],
        resources=["*"],
        conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
    )


def acknowledge_prefix_wildcards(
    identity: IConstruct, bucket: s3.IBucket, prefixes: Sequence[str], *, metrics: bool = False
) -> None:
    """Acknowledge the IAM5 findings that are the design: `<prefix>*` objects and namespaced metrics.

    cdk-nag reports one finding per wildcard resource, so each prefix is acknowledged by name:
    any other wildcard added to these roles later still fails the check.
    """
    stack = Stack.of(identity)
    logical_id = stack.resolve(stack.get_logical_id(bucket.node.default_child))
    acks = [
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{prefix}*]",
            reason="Object access is scoped to one model-store prefix; S3 needs the trailing wildcard "
            "to name the objects under it.",
        )
        for prefix in prefixes
    ]
    if metrics:
        acks.append(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData has no resource-level scoping; it is limited by the "
                "cloudwatch:namespace condition to the service's own namespace.",
            )
        )
    Validations.of(identity).acknowledge(*acks)
