"""The run-CodeBuild-and-wait custom resource handler (image builds, weights staging) against moto."""

from __future__ import annotations

import re
import time

import boto3
import pytest
from moto import mock_aws
from moto.codebuild.models import CodeBuildBackend
from moto.core import DEFAULT_ACCOUNT_ID

from lambdas import codebuild_runner as handler

REGION = "us-east-1"
URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd-on-eks/stable-diffusion"


@pytest.fixture
def codebuild(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("codebuild", region_name=REGION)
        for name in ("neuron-build", "nvidia-build", "stage-weights"):
            client.create_project(
                name=name,
                source={"type": "S3", "location": "bucket/source.zip"},
                artifacts={"type": "NO_ARTIFACTS"},
                environment={
                    "type": "LINUX_CONTAINER",
                    "image": "aws/codebuild/amazonlinux-x86_64-standard:5.0",
                    "computeType": "BUILD_GENERAL1_LARGE",
                    "privilegedMode": True,
                },
                serviceRole=f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/codebuild",
            )
        yield client


def _event(request="Create", **extra):
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
            "SourceHash": "abc123",
            "Builds": [
                {"Project": "neuron-build", "Accelerator": "neuron", "ImageUri": f"{URI}:neuron-abc123"},
                {"Project": "nvidia-build", "Accelerator": "nvidia", "ImageUri": f"{URI}:nvidia-abc123"},
            ],
        },
        **extra,
    }


def _set_status(monkeypatch, status, link="https://console.aws.amazon.com/cloudwatch/home#logEvent:group=x"):
    """Make moto report `status` for every build (moto itself always reports SUCCEEDED)."""
    original = CodeBuildBackend.batch_get_builds

    def batch_get_builds(self, ids):
        builds = original(self, ids)
        for build in builds:
            build["buildStatus"] = status
            build["logs"] = {"deepLink": link}
        return builds

    monkeypatch.setattr(CodeBuildBackend, "batch_get_builds", batch_get_builds)


def test_create_starts_one_build_per_project(codebuild):
    result = handler.on_event(_event())
    build_ids = result["Data"]["BuildIds"].split(",")
    assert len(build_ids) == 2
    assert build_ids[0].startswith("neuron-build:") and build_ids[1].startswith("nvidia-build:")
    assert result["PhysicalResourceId"] == "images-neuron-abc123-nvidia-abc123"
    assert len(codebuild.list_builds()["ids"]) == 2


def test_update_starts_new_builds(codebuild):
    first = handler.on_event(_event())
    second = handler.on_event(_event("Update", PhysicalResourceId=first["PhysicalResourceId"]))
    assert set(first["Data"]["BuildIds"].split(",")).isdisjoint(second["Data"]["BuildIds"].split(","))
    assert len(codebuild.list_builds()["ids"]) == 4


def test_complete_when_all_builds_succeeded_returns_the_image_uris(codebuild):
    started = handler.on_event(_event())
    result = handler.is_complete({**_event(), **started})
    assert result == {
        "IsComplete": True,
        "Data": {"neuronImageUri": f"{URI}:neuron-abc123", "nvidiaImageUri": f"{URI}:nvidia-abc123"},
    }


def test_not_complete_while_a_build_runs(codebuild, monkeypatch):
    started = handler.on_event(_event())
    _set_status(monkeypatch, "IN_PROGRESS")
    assert handler.is_complete({**_event(), **started}) == {"IsComplete": False}


@pytest.mark.parametrize("status", ["FAILED", "FAULT", "STOPPED", "TIMED_OUT"])
def test_a_failed_build_fails_the_deploy_with_its_log_link(codebuild, monkeypatch, status):
    started = handler.on_event(_event())
    _set_status(monkeypatch, status, link="https://logs.example/neuron-build")
    with pytest.raises(handler.BuildFailedError) as raised:
        handler.is_complete({**_event(), **started})
    assert status in str(raised.value)
    assert "https://logs.example/neuron-build" in str(raised.value)


def test_unknown_build_ids_fail(codebuild):
    with pytest.raises(handler.BuildFailedError, match="does not know"):
        handler.is_complete({**_event(), "Data": {"BuildIds": "neuron-build:00000000-0000-0000-0000-000000000000"}})


def test_start_failure_surfaces(codebuild):
    event = _event()
    event["ResourceProperties"]["Builds"][0]["Project"] = "no-such-project"
    with pytest.raises(Exception):  # noqa: B017 - botocore's error class is generated at run time
        handler.on_event(event)


def test_delete_does_nothing(codebuild):
    result = handler.on_event(_event("Delete", PhysicalResourceId="images-x"))
    assert result == {"PhysicalResourceId": "images-x"}
    assert codebuild.list_builds()["ids"] == []
    assert handler.is_complete(_event("Delete", PhysicalResourceId="images-x")) == {"IsComplete": True}


def test_bad_properties_are_rejected():
    event = _event()
    event["ResourceProperties"]["Builds"] = []
    with pytest.raises(ValueError, match="Builds"):
        handler.on_event(event)


def _running_since(monkeypatch, seconds_ago):
    """Make moto report every build IN_PROGRESS, started `seconds_ago`."""
    original = CodeBuildBackend.batch_get_builds

    def batch_get_builds(self, ids):
        builds = original(self, ids)
        for build in builds:
            build["buildStatus"] = "IN_PROGRESS"
            build["startTime"] = time.time() - seconds_ago
            build["logs"] = {"deepLink": "https://logs.example/" + build["projectName"]}
        return builds

    monkeypatch.setattr(CodeBuildBackend, "batch_get_builds", batch_get_builds)


def test_builds_longer_than_a_deploy_can_wait_end_the_wait_with_a_way_forward(codebuild, monkeypatch):
    monkeypatch.setenv("REPORT_AFTER_SECONDS", "2700")
    started = handler.on_event(_event())
    _running_since(monkeypatch, 600)
    assert handler.is_complete({**_event(), **started}) == {"IsComplete": False}
    _running_since(monkeypatch, 2800)
    with pytest.raises(handler.BuildStillRunningError) as raised:
        handler.is_complete({**_event(), **started})
    message = str(raised.value)
    assert "https://logs.example/neuron-build" in message and "https://logs.example/nvidia-build" in message
    assert "run `cdk deploy` again" in message


def _staging_event(request="Create", **extra):
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
            "PhysicalResourceId": "weights-org--tiny-sd",
            "Builds": [{"Project": "stage-weights", "Outputs": {"WeightsUri": "s3://store/models/org--tiny-sd/"}}],
        },
        **extra,
    }


def test_any_build_runs_under_the_given_id_and_returns_its_outputs(codebuild):
    started = handler.on_event(_staging_event())
    assert started["PhysicalResourceId"] == "weights-org--tiny-sd"
    assert started["Data"]["BuildIds"].startswith("stage-weights:")
    assert handler.is_complete({**_staging_event(), **started}) == {
        "IsComplete": True,
        "Data": {"WeightsUri": "s3://store/models/org--tiny-sd/"},
    }


def test_a_failed_staging_build_fails_the_deploy_with_its_log_link(codebuild, monkeypatch):
    started = handler.on_event(_staging_event())
    _set_status(monkeypatch, "FAILED", link="https://logs.example/stage-weights")
    with pytest.raises(
        handler.BuildFailedError, match=re.escape("stage-weights FAILED: https://logs.example/stage-weights")
    ):
        handler.is_complete({**_staging_event(), **started})


def test_a_build_without_image_uri_needs_a_physical_id(codebuild):
    event = _staging_event()
    del event["ResourceProperties"]["PhysicalResourceId"]
    with pytest.raises(ValueError, match="PhysicalResourceId"):
        handler.on_event(event)
    assert codebuild.list_builds()["ids"] == []


@pytest.mark.parametrize("builds", [[{}], [{"Project": ""}], ["stage-weights"]])
def test_builds_without_a_project_are_rejected(builds):
    event = _staging_event()
    event["ResourceProperties"]["Builds"] = builds
    with pytest.raises(ValueError, match="Project"):
        handler.on_event(event)
