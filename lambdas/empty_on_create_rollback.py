"""Custom resource that empties buckets when the stack operation that created them rolls back.

The buckets are `RetainExceptOnCreate` (cdk/retention.py): kept by a stack delete or a replacement,
deleted when their first create rolls back. CloudFormation cannot delete a bucket that holds objects,
though, and a failed first deploy may already have written some (staged weights, access logs). This
resource depends on the buckets, so a rollback deletes it before them; its Delete empties them only
when the stack is in ROLLBACK_IN_PROGRESS, the status of a rolled-back create (an update rolls back
as UPDATE_ROLLBACK_IN_PROGRESS, a stack delete is DELETE_IN_PROGRESS: then the data stays).

Properties:
    Buckets: [bucket name, ...]
Plain boto3 only, so the handler runs on the stock Lambda runtime (CDK provider framework, onEvent only).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

CREATE_ROLLBACK = "ROLLBACK_IN_PROGRESS"
PHYSICAL_ID = "empty-on-create-rollback"
DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


def _buckets(props: dict[str, Any]) -> list[str]:
    """The `Buckets` property: a list of bucket names."""
    buckets = props.get("Buckets")
    if not isinstance(buckets, list) or not all(isinstance(b, str) and b for b in buckets):
        raise ValueError("property Buckets must be a list of bucket names")
    return buckets


def _cloudformation() -> Any:
    return boto3.client("cloudformation")


def _stack_status(stack_id: str) -> str:
    """The current status of the stack this resource belongs to."""
    (stack,) = _cloudformation().describe_stacks(StackName=stack_id)["Stacks"]
    return str(stack["StackStatus"])


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


def on_event(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Nothing on Create/Update; on Delete during a create rollback, empty the buckets."""
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    LOG.info("%s: %s", request, json.dumps(props))
    buckets = _buckets(props)
    if request != "Delete":
        return {"PhysicalResourceId": PHYSICAL_ID}
    status = _stack_status(event["StackId"])
    if status != CREATE_ROLLBACK:
        LOG.info("stack is %s, not rolling back its create: the buckets keep their data", status)
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    for bucket in buckets:
        LOG.info("emptied %s: %d object versions", bucket, empty_bucket(bucket))
    return {"PhysicalResourceId": event["PhysicalResourceId"]}
