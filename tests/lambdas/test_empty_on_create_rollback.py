"""The empty-the-buckets-when-their-create-rolls-back custom resource handler: S3 against moto, the
stack status from a botocore-stubbed CloudFormation client (moto cannot report an operation in progress)."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from lambdas import empty_on_create_rollback as handler

REGION = "us-east-1"
BUCKETS = ["sd-model-store", "sd-access-logs"]
STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/SdOnEksServing/0f3c1a2e-1111-2222-3333-444455556666"


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in BUCKETS:
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
            for n in range(3):  # two versions each, then a delete marker on one
                s3.put_object(Bucket=bucket, Key=f"models/part-{n}", Body=b"v1")
                s3.put_object(Bucket=bucket, Key=f"models/part-{n}", Body=b"v2")
            s3.delete_object(Bucket=bucket, Key="models/part-0")
        yield s3, STACK_ID


def _set_stack_status(monkeypatch, stack_id, status):
    """DescribeStacks answers `status` for this stack, as CloudFormation does during the operation."""
    client = boto3.client("cloudformation", region_name=REGION)
    stubber = Stubber(client)
    stack = {"StackId": stack_id, "StackName": "SdOnEksServing", "CreationTime": datetime.now(UTC)}
    stubber.add_response("describe_stacks", {"Stacks": [{**stack, "StackStatus": status}]}, {"StackName": stack_id})
    stubber.activate()
    monkeypatch.setattr(handler, "_cloudformation", lambda: client)


def _event(request, stack_id):
    return {
        "RequestType": request,
        "StackId": stack_id,
        "PhysicalResourceId": handler.PHYSICAL_ID,
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:p", "Buckets": BUCKETS},
    }


def _versions(s3, bucket):
    page = s3.list_object_versions(Bucket=bucket)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def test_a_rolled_back_create_empties_every_bucket(aws, monkeypatch):
    s3, stack_id = aws
    _set_stack_status(monkeypatch, stack_id, "ROLLBACK_IN_PROGRESS")
    assert handler.on_event(_event("Delete", stack_id)) == {"PhysicalResourceId": handler.PHYSICAL_ID}
    for bucket in BUCKETS:
        assert _versions(s3, bucket) == 0
        s3.delete_bucket(Bucket=bucket)  # what the rollback does next: it now succeeds


@pytest.mark.parametrize("status", ["DELETE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_IN_PROGRESS"])
def test_any_other_delete_keeps_the_data(aws, monkeypatch, status):
    s3, stack_id = aws
    _set_stack_status(monkeypatch, stack_id, status)
    handler.on_event(_event("Delete", stack_id))
    assert all(_versions(s3, bucket) == 7 for bucket in BUCKETS)


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_touch_nothing(aws, request_type):
    s3, stack_id = aws
    assert handler.on_event(_event(request_type, stack_id)) == {"PhysicalResourceId": handler.PHYSICAL_ID}
    assert all(_versions(s3, bucket) == 7 for bucket in BUCKETS)


def test_more_objects_than_one_delete_call_takes(aws, monkeypatch):
    s3, _ = aws
    monkeypatch.setattr(handler, "DELETE_BATCH", 2)
    assert handler.empty_bucket(BUCKETS[0]) == 7
    assert _versions(s3, BUCKETS[0]) == 0


@pytest.mark.parametrize("buckets", [None, "store", [""], [1]])
def test_bad_buckets_are_rejected(buckets):
    with pytest.raises(ValueError, match="Buckets"):
        handler.on_event({"RequestType": "Create", "ResourceProperties": {"Buckets": buckets}})
