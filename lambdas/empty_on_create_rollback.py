"""Custom resource that empties buckets when the stack operation that created them rolls back.

The buckets are `RetainExceptOnCreate` (cdk/retention.py): kept by a stack delete or a replacement,
deleted when their first create rolls back. CloudFormation cannot delete a bucket that holds objects,
though, and a failed first deploy may already have written some (staged weights, access logs). This
resource depends on the buckets, so a rollback deletes it before them; its Delete empties them only
when the stack is in ROLLBACK_IN_PROGRESS, the status of a rolled-back create (an update rolls back
as UPDATE_ROLLBACK_IN_PROGRESS, a stack delete is DELETE_IN_PROGRESS: then the data stays).

The log bucket keeps receiving objects after the rollback reaches this resource: S3 server access
logs of the data buckets (delivered late, and written for the emptying itself) and the ALB's last
access-log file (written every 5 minutes; the ALB is deleted just before). So the handler first turns
the data buckets' server access logging off, then empties them, then empties the log bucket again and
again until it has stayed empty for `QuietSeconds`, as long as the Lambda's remaining time allows.

Properties:
    Buckets: [bucket name, ...]  the data buckets; their server access logs go to LogBucket
    LogBucket: bucket name       where the data buckets' and the ALB's access logs go; emptied last
    QuietSeconds: number         how long LogBucket must stay empty (longer than the ALB's log interval)
    PollSeconds: number          how often LogBucket is emptied while waiting
CloudFormation hands numbers to a custom resource as strings; both forms are accepted.
Plain boto3 only, so the handler runs on the stock Lambda runtime (CDK provider framework, onEvent only).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from time import monotonic, sleep
from typing import Any, Protocol

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

CREATE_ROLLBACK = "ROLLBACK_IN_PROGRESS"
PHYSICAL_ID = "empty-on-create-rollback"
DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys
# Kept free of waiting at the end of the Lambda's time: a last emptying pass and the answer to the provider.
MARGIN_S = 30.0


class LambdaContext(Protocol):
    """The part of Lambda's context object the handler reads."""

    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class Props:
    """The resource's properties, validated."""

    buckets: list[str]
    log_bucket: str
    quiet_s: float
    poll_s: float


def _seconds(props: dict[str, Any], name: str) -> float:
    """A positive number of seconds, given as a number or (as CloudFormation sends it) a string."""
    value = props.get(name)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not 0 < seconds < math.inf:
        raise ValueError(f"property {name} must be a positive number of seconds, not {value!r}")
    return seconds


def parse_props(props: dict[str, Any]) -> Props:
    """Validate `Buckets`, `LogBucket`, `QuietSeconds` and `PollSeconds`; a ValueError names the bad one."""
    buckets = props.get("Buckets")
    if not isinstance(buckets, list) or not all(isinstance(b, str) and b for b in buckets):
        raise ValueError("property Buckets must be a list of bucket names")
    log_bucket = props.get("LogBucket")
    if not isinstance(log_bucket, str) or not log_bucket:
        raise ValueError("property LogBucket must be a bucket name")
    if log_bucket in buckets:
        raise ValueError("property LogBucket must not be one of Buckets: it is emptied last, on its own")
    return Props(buckets, log_bucket, _seconds(props, "QuietSeconds"), _seconds(props, "PollSeconds"))


def _cloudformation() -> Any:
    return boto3.client("cloudformation")


def _stack_status(stack_id: str) -> str:
    """The current status of the stack this resource belongs to."""
    (stack,) = _cloudformation().describe_stacks(StackName=stack_id)["Stacks"]
    return str(stack["StackStatus"])


def stop_access_logging(bucket: str) -> None:
    """Turn off S3 server access logging of `bucket` (an empty BucketLoggingStatus turns it off)."""
    boto3.client("s3").put_bucket_logging(Bucket=bucket, BucketLoggingStatus={})


def empty_bucket(bucket: str) -> int:
    """Delete every object version and delete marker in `bucket`; returns how many were deleted."""
    s3 = boto3.client("s3")
    deleted = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            errors = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True}).get("Errors", [])
            if errors:
                raise RuntimeError(f"could not empty {bucket}: {errors[:3]}")
            deleted += len(batch)
    return deleted


def empty_until_quiet(bucket: str, quiet_s: float, poll_s: float, context: LambdaContext) -> None:
    """Empty `bucket` every `poll_s` until it has stayed empty for `quiet_s`.

    Returns earlier, having logged what is left, when the Lambda's remaining time (less MARGIN_S) would
    run out before the next look.
    """
    deleted = empty_bucket(bucket)
    last_found = monotonic()  # the window starts after the first pass and restarts at every object found
    while monotonic() - last_found < quiet_s:
        if context.get_remaining_time_in_millis() / 1000 - MARGIN_S < poll_s:
            LOG.error(
                "%s has stayed empty for only %.0f s of the %.0f s asked when this handler's time ran out "
                "(%d object versions deleted in all). An access log delivered from now on (the ALB's last "
                "file, a late S3 server access log) makes CloudFormation's DeleteBucket fail with "
                "BucketNotEmpty and the rollback end in ROLLBACK_FAILED: then empty the bucket and delete "
                "the stack",
                bucket,
                monotonic() - last_found,
                quiet_s,
                deleted,
            )
            return
        sleep(poll_s)
        found = empty_bucket(bucket)
        if found:
            LOG.info("%s received %d object versions meanwhile: deleted, waiting %.0f s again", bucket, found, quiet_s)
            deleted += found
            last_found = monotonic()
    LOG.info("emptied %s: %d object versions, then empty for %.0f s", bucket, deleted, quiet_s)


def on_event(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Nothing on Create/Update; on Delete during a create rollback, empty the buckets, the log bucket last."""
    request = event["RequestType"]
    raw = event.get("ResourceProperties", {})
    LOG.info("%s: %s", request, json.dumps(raw))
    props = parse_props(raw)
    if request != "Delete":
        return {"PhysicalResourceId": PHYSICAL_ID}
    status = _stack_status(event["StackId"])
    if status != CREATE_ROLLBACK:
        LOG.info("stack is %s, not rolling back its create: the buckets keep their data", status)
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    # Emptying a bucket that logs would itself write log records into the log bucket.
    for bucket in props.buckets:
        stop_access_logging(bucket)
    for bucket in props.buckets:
        LOG.info("emptied %s: %d object versions", bucket, empty_bucket(bucket))
    empty_until_quiet(props.log_bucket, props.quiet_s, props.poll_s, context)
    return {"PhysicalResourceId": event["PhysicalResourceId"]}
