"""The empty-the-buckets-when-their-create-rolls-back custom resource handler: S3 against moto, the
stack status from a botocore-stubbed CloudFormation client (moto cannot report an operation in progress),
time from a clock that advances only when the handler sleeps, with the Lambda's deadline on it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from lambdas import empty_on_create_rollback as handler

REGION = "us-east-1"
DATA_BUCKETS = ["sd-model-store", "sd-job-results"]
LOG_BUCKET = "sd-access-logs"
BUCKETS = [*DATA_BUCKETS, LOG_BUCKET]
QUIET_S = 40.0
POLL_S = 10.0
STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/SdOnEksServing/0f3c1a2e-1111-2222-3333-444455556666"


class Clock:
    """Time that passes only while the handler sleeps, and the Lambda context whose deadline is on it.

    `deliver(now)` runs after each sleep: what lands in the buckets meanwhile.
    """

    def __init__(self, budget_s: float, deliver: Callable[[float], None] = lambda now: None) -> None:
        self.now = 0.0
        self.budget_s = budget_s
        self.deliver = deliver

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        assert self.now < self.budget_s, "Lambda would have stopped the handler before it answered"
        self.deliver(self.now)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.budget_s - self.now) * 1000)


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
        # As deployed (cdk/serving/model_store.py log_server_access): S3 may write into the log bucket.
        s3.put_bucket_policy(
            Bucket=LOG_BUCKET,
            Policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "logging.s3.amazonaws.com"},
                            "Action": "s3:PutObject",
                            "Resource": f"arn:aws:s3:::{LOG_BUCKET}/s3/*",
                        }
                    ],
                }
            ),
        )
        for bucket in DATA_BUCKETS:
            s3.put_bucket_logging(
                Bucket=bucket,
                BucketLoggingStatus={"LoggingEnabled": {"TargetBucket": LOG_BUCKET, "TargetPrefix": "s3/"}},
            )
        yield s3, STACK_ID


def _set_stack_status(monkeypatch, stack_id, status):
    """DescribeStacks answers `status` for this stack, as CloudFormation does during the operation."""
    client = boto3.client("cloudformation", region_name=REGION)
    stubber = Stubber(client)
    stack = {"StackId": stack_id, "StackName": "SdOnEksServing", "CreationTime": datetime.now(UTC)}
    stubber.add_response("describe_stacks", {"Stacks": [{**stack, "StackStatus": status}]}, {"StackName": stack_id})
    stubber.activate()
    monkeypatch.setattr(handler, "_cloudformation", lambda: client)


def _use_clock(monkeypatch, clock: Clock) -> Clock:
    monkeypatch.setattr(handler, "monotonic", clock.monotonic)
    monkeypatch.setattr(handler, "sleep", clock.sleep)
    return clock


def _properties(**overrides):
    # CloudFormation hands numbers over as strings.
    props = {
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:p",
        "Buckets": DATA_BUCKETS,
        "LogBucket": LOG_BUCKET,
        "QuietSeconds": str(QUIET_S),
        "PollSeconds": str(POLL_S),
    }
    return {**props, **overrides}


def _event(request, stack_id, **props):
    return {
        "RequestType": request,
        "StackId": stack_id,
        "PhysicalResourceId": handler.PHYSICAL_ID,
        "ResourceProperties": _properties(**props),
    }


def _versions(s3, bucket):
    page = s3.list_object_versions(Bucket=bucket)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def _rollback(monkeypatch, stack_id, clock):
    _set_stack_status(monkeypatch, stack_id, "ROLLBACK_IN_PROGRESS")
    _use_clock(monkeypatch, clock)
    return handler.on_event(_event("Delete", stack_id), clock)


def _late_log(s3, key="alb/AWSLogs/123456789012/last.log.gz"):
    s3.put_object(Bucket=LOG_BUCKET, Key=key, Body=b"late")


def test_a_rolled_back_create_empties_every_bucket(aws, monkeypatch):
    s3, stack_id = aws
    clock = Clock(budget_s=600)
    assert _rollback(monkeypatch, stack_id, clock) == {"PhysicalResourceId": handler.PHYSICAL_ID}
    for bucket in BUCKETS:
        assert _versions(s3, bucket) == 0
        s3.delete_bucket(Bucket=bucket)  # what the rollback does next: it now succeeds
    # The log bucket was watched for the whole quiet window, and not much longer.
    assert QUIET_S <= clock.now < QUIET_S + POLL_S


def test_a_log_file_delivered_during_the_rollback_is_removed(aws, monkeypatch):
    s3, stack_id = aws
    delivered: list[float] = []

    def deliver(now):
        if not delivered:  # after the first emptying pass of the log bucket, once
            assert _versions(s3, LOG_BUCKET) == 0
            _late_log(s3)
            delivered.append(now)

    _rollback(monkeypatch, stack_id, Clock(budget_s=600, deliver=deliver))
    assert delivered
    assert _versions(s3, LOG_BUCKET) == 0
    s3.delete_bucket(Bucket=LOG_BUCKET)


def test_the_quiet_window_restarts_when_a_log_file_arrives(aws, monkeypatch):
    s3, stack_id = aws
    arrivals = {20.0, 50.0}

    def deliver(now):
        if now in arrivals:
            _late_log(s3, key=f"s3/late-{now:.0f}")

    clock = Clock(budget_s=600, deliver=deliver)
    _rollback(monkeypatch, stack_id, clock)
    # Quiet only from the last arrival on: 50 s + the window, not the 40 s of an undisturbed bucket.
    assert 50.0 + QUIET_S <= clock.now < 50.0 + QUIET_S + POLL_S
    assert _versions(s3, LOG_BUCKET) == 0


def test_access_logging_is_off_before_the_data_buckets_are_emptied(aws, monkeypatch):
    s3, stack_id = aws
    emptied: list[str] = []
    empty = handler.empty_bucket

    def empty_after_logging_stopped(bucket):
        assert all("LoggingEnabled" not in s3.get_bucket_logging(Bucket=b) for b in DATA_BUCKETS)
        emptied.append(bucket)
        return empty(bucket)

    monkeypatch.setattr(handler, "empty_bucket", empty_after_logging_stopped)
    _rollback(monkeypatch, stack_id, Clock(budget_s=600))
    assert emptied[: len(DATA_BUCKETS)] == DATA_BUCKETS
    assert set(emptied[len(DATA_BUCKETS) :]) == {LOG_BUCKET}  # last, and again while waiting
    for bucket in DATA_BUCKETS:
        assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket=bucket)


def test_time_running_out_returns_and_says_what_is_left(aws, monkeypatch, caplog):
    s3, stack_id = aws
    budget_s = handler.MARGIN_S + 3 * POLL_S
    clock = Clock(budget_s=budget_s, deliver=lambda now: _late_log(s3, key=f"s3/late-{now:.0f}"))
    with caplog.at_level(logging.ERROR):
        assert _rollback(monkeypatch, stack_id, clock) == {"PhysicalResourceId": handler.PHYSICAL_ID}
    # It stopped waiting in time to answer, and said why CloudFormation may still fail.
    assert clock.now <= budget_s - handler.MARGIN_S
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert LOG_BUCKET in record.getMessage()
    assert "BucketNotEmpty" in record.getMessage()
    assert all(_versions(s3, bucket) == 0 for bucket in DATA_BUCKETS)


@pytest.mark.parametrize("status", ["DELETE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_IN_PROGRESS"])
def test_any_other_delete_keeps_the_data(aws, monkeypatch, status):
    s3, stack_id = aws
    _set_stack_status(monkeypatch, stack_id, status)
    handler.on_event(_event("Delete", stack_id), Clock(budget_s=600))
    assert all(_versions(s3, bucket) == 7 for bucket in DATA_BUCKETS)
    assert _versions(s3, LOG_BUCKET) >= 7  # moto logs each request to a data bucket into it, as S3 does
    assert all(s3.get_bucket_logging(Bucket=b)["LoggingEnabled"]["TargetBucket"] == LOG_BUCKET for b in DATA_BUCKETS)


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_touch_nothing(aws, request_type):
    s3, stack_id = aws
    result = handler.on_event(_event(request_type, stack_id), Clock(budget_s=600))
    assert result == {"PhysicalResourceId": handler.PHYSICAL_ID}
    assert all(_versions(s3, bucket) == 7 for bucket in DATA_BUCKETS)
    assert _versions(s3, LOG_BUCKET) >= 7


def test_more_objects_than_one_delete_call_takes(aws, monkeypatch):
    s3, _ = aws
    monkeypatch.setattr(handler, "DELETE_BATCH", 2)
    assert handler.empty_bucket(DATA_BUCKETS[0]) == 7
    assert _versions(s3, DATA_BUCKETS[0]) == 0


def test_numbers_are_taken_as_numbers_or_strings():
    props = handler.parse_props(_properties(QuietSeconds=360, PollSeconds="30"))
    assert (props.quiet_s, props.poll_s) == (360.0, 30.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Buckets", None),
        ("Buckets", "store"),
        ("Buckets", [""]),
        ("Buckets", [1]),
        ("LogBucket", None),
        ("LogBucket", ""),
        ("LogBucket", ["logs"]),
        ("LogBucket", DATA_BUCKETS[0]),
        ("QuietSeconds", None),
        ("QuietSeconds", "six minutes"),
        ("QuietSeconds", "0"),
        ("QuietSeconds", True),
        ("PollSeconds", -5),
        ("PollSeconds", "inf"),
        ("PollSeconds", "nan"),
    ],
)
def test_bad_properties_are_rejected(name, value):
    with pytest.raises(ValueError, match=name):
        handler.on_event({"RequestType": "Create", "ResourceProperties": _properties(**{name: value})}, Clock(600))
