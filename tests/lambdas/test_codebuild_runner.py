"""The run-CodeBuild-and-wait custom resource handler (image builds, weights staging) against moto."""

from __future__ import annotations

import copy
import json
import re
import time

import boto3
import pytest
from moto import mock_aws
from moto.codebuild.models import CodeBuildBackend
from moto.core import DEFAULT_ACCOUNT_ID

from lambdas import codebuild_runner as handler

REGION = "us-east-1"
REPOSITORY = "sd-on-eks/stable-diffusion"
URI = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{REPOSITORY}"
TAGS = {"neuron-build": "neuron-abc123", "nvidia-build": "nvidia-abc123"}  # each project's IMAGE_TAG


@pytest.fixture
def codebuild(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    _builds_keep_their_projects_environment(monkeypatch)
    with mock_aws():
        client = boto3.client("codebuild", region_name=REGION)
        for name in ("neuron-build", "nvidia-build", "stage-weights"):
            variables = [{"name": "IMAGE_TAG", "value": TAGS[name], "type": "PLAINTEXT"}] if name in TAGS else []
            client.create_project(
                name=name,
                source={"type": "S3", "location": "bucket/source.zip"},
                artifacts={"type": "NO_ARTIFACTS"},
                environment={
                    "type": "LINUX_CONTAINER",
                    "image": "aws/codebuild/amazonlinux-x86_64-standard:5.0",
                    "computeType": "BUILD_GENERAL1_LARGE",
                    "privilegedMode": True,
                    "environmentVariables": variables,
                },
                serviceRole=f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/codebuild",
            )
        boto3.client("ecr", region_name=REGION).create_repository(repositoryName=REPOSITORY)
        yield client


def _builds_keep_their_projects_environment(monkeypatch):
    """CodeBuild records the project's environment variables (IMAGE_TAG) on each build; moto does not."""
    original = CodeBuildBackend.start_build

    def start_build(self, project_name, *args, **kwargs):
        build = original(self, project_name, *args, **kwargs)
        project = self.codebuild_projects[project_name].project_metadata
        build["environment"]["environmentVariables"] = copy.deepcopy(project["environment"]["environmentVariables"])
        return build

    monkeypatch.setattr(CodeBuildBackend, "start_build", start_build)


def _push(tag):
    """An image with this tag in the repository, as a finished build leaves it."""
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}
    boto3.client("ecr", region_name=REGION).put_image(
        repositoryName=REPOSITORY, imageManifest=json.dumps({**manifest, "tag": tag}), imageTag=tag
    )


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


def test_an_update_whose_images_are_missing_and_not_being_built_starts_new_builds(codebuild):
    first = handler.on_event(_event())  # moto reports these builds finished, yet nothing was pushed
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


def _stage(stage, stages, request="Create", **extra):
    event = _event(request, **extra)
    event["ResourceProperties"].update({"WaitStage": str(stage), "WaitStages": str(stages)})  # strings, as from CFN
    return event


def _waited(started, seconds):
    """on_event's answer as is_complete sees it `seconds` after on_event ran."""
    return {**started, "Data": {**started["Data"], "WaitStarted": str(time.time() - seconds)}}


def test_a_stage_that_runs_out_of_time_hands_on_to_the_next(codebuild, monkeypatch):
    monkeypatch.setenv("REPORT_AFTER_SECONDS", "2700")
    started = handler.on_event(_stage(1, 4))
    _running_since(monkeypatch, 2800)
    assert handler.is_complete({**_stage(1, 4), **_waited(started, 600)}) == {"IsComplete": False}
    handed_on = handler.is_complete({**_stage(1, 4), **_waited(started, 2800)})
    assert handed_on["IsComplete"] is True  # CloudFormation goes on to the next stage, which depends on this one


def test_later_stages_wait_for_the_same_builds_without_starting_any(codebuild, monkeypatch):
    first = handler.on_event(_stage(1, 4))
    _running_since(monkeypatch, 2800)
    for stage in (2, 3, 4):
        later = handler.on_event(_stage(stage, 4))
        assert later["Data"]["BuildIds"] == first["Data"]["BuildIds"]
        assert later["PhysicalResourceId"] == f"{first['PhysicalResourceId']}-wait{stage}"
    assert len(codebuild.list_builds()["ids"]) == 2


def test_builds_longer_than_every_stage_end_the_deploy_with_their_log_links(codebuild, monkeypatch):
    monkeypatch.setenv("REPORT_AFTER_SECONDS", "2700")
    handler.on_event(_stage(1, 4))
    last = handler.on_event(_stage(4, 4))
    _running_since(monkeypatch, 4 * 2800)
    with pytest.raises(handler.BuildStillRunningError) as raised:
        handler.is_complete({**_stage(4, 4), **_waited(last, 2800)})
    message = str(raised.value)
    assert "https://logs.example/neuron-build" in message and "https://logs.example/nvidia-build" in message
    assert "A later `cdk deploy` waits for a build still running or reuses its pushed image" in message


def test_a_build_that_failed_between_stages_fails_the_next_stage_with_its_log_link(codebuild, monkeypatch):
    handler.on_event(_stage(1, 4))
    _set_status(monkeypatch, "FAILED", link="https://logs.example/failed")
    later = handler.on_event(_stage(2, 4))
    with pytest.raises(handler.BuildFailedError, match=re.escape("https://logs.example/failed")):
        handler.is_complete({**_stage(2, 4), **later})


def test_a_later_stage_with_neither_image_nor_build_fails(codebuild):
    with pytest.raises(handler.BuildFailedError, match="no build of neuron-build makes it"):
        handler.on_event(_stage(2, 4))


@pytest.mark.parametrize(("stage", "stages"), [("0", "4"), ("5", "4"), ("two", "4")])
def test_bad_stages_are_rejected(codebuild, stage, stages):
    event = _event()
    event["ResourceProperties"].update({"WaitStage": stage, "WaitStages": stages})
    with pytest.raises(ValueError, match="WaitStage"):
        handler.on_event(event)
    assert codebuild.list_builds()["ids"] == []


def test_a_deploy_after_one_that_stopped_waiting_waits_for_the_running_builds(codebuild, monkeypatch):
    """The second `cdk deploy` finds the first one's builds still running and waits for them."""
    first = handler.on_event(_event())
    _running_since(monkeypatch, 3000)
    again = handler.on_event(_event("Update", PhysicalResourceId=first["PhysicalResourceId"]))
    assert again["Data"]["BuildIds"] == first["Data"]["BuildIds"]
    assert len(codebuild.list_builds()["ids"]) == 2


def test_a_deploy_after_one_that_stopped_waiting_finds_the_pushed_images(codebuild):
    """The second `cdk deploy` finds the first one's images pushed: no build, and done at once."""
    handler.on_event(_event())
    _push("neuron-abc123")
    _push("nvidia-abc123")
    again = handler.on_event(_event("Update", PhysicalResourceId="images-neuron-abc123-nvidia-abc123"))
    assert again["Data"]["BuildIds"] == ""
    assert len(codebuild.list_builds()["ids"]) == 2  # only the first deploy's
    assert handler.is_complete({**_event("Update"), **again}) == {
        "IsComplete": True,
        "Data": {"neuronImageUri": f"{URI}:neuron-abc123", "nvidiaImageUri": f"{URI}:nvidia-abc123"},
    }


def test_only_images_not_yet_pushed_are_built(codebuild):
    _push("neuron-abc123")
    started = handler.on_event(_event())
    (build_id,) = started["Data"]["BuildIds"].split(",")
    assert build_id.startswith("nvidia-build:")


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
