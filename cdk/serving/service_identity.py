"""The IAM statements serving pods get through Pod Identity: one model-store prefix each, one metric namespace."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3


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
