"""Custom resource that runs CodeBuild builds during `cdk deploy` and waits for them (CDK provider framework).

Used for the service images (`Custom::ImageBuilds`) and for staging the model weights
(`Custom::ModelStaging`). `on_event` starts one build per entry of `Builds` on Create/Update and
returns their ids; `is_complete` polls them until all succeed, and fails the deployment with the
failed build's log link otherwise. Delete does nothing: what the builds made (images in ECR, weights
in the model store) stays, and their own retention rules apply.

Image builds (entries with an ImageUri) never build twice: an image already in the repository needs
no build, and a build of the same project already making the same tag (IMAGE_TAG) is waited for
instead of starting another, so a deploy after one that stopped waiting picks up where it left off.

CloudFormation waits at most an hour for one custom resource, and an image build (queue time
included) can take longer. So the image builds are waited for by a chain of resources
(`WaitStage` 1..`WaitStages`, each depending on the one before): stage 1 starts the builds, the later
stages only wait for them. Each stage waits REPORT_AFTER_SECONDS (environment) from its own start; a
stage that runs out hands on to the next one, and the last one fails the deployment with the
still-running builds' log links.

Properties:
    Builds: [{"Project": name, "Outputs": {key: value}?, "Accelerator"?, "ImageUri"?}, ...]
    PhysicalResourceId: optional; the resource's id (a change of it is a replacement)
    WaitStage, WaitStages: optional (default 1 of 1); image builds only beyond stage 1
Image builds pass Accelerator + ImageUri and no PhysicalResourceId: their id is
`images-<tag>-<tag>` (`-wait<k>` for a later stage) and their outputs `<accelerator>ImageUri`.
Plain boto3 only, so the handler runs on the stock Lambda runtime.
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SUCCEEDED = "SUCCEEDED"
FAILED_STATES = frozenset({"FAILED", "FAULT", "STOPPED", "TIMED_OUT"})
IN_PROGRESS = "IN_PROGRESS"
# How many of a project's newest builds are searched for one making the same tag (BatchGetBuilds takes 100).
RECENT_BUILDS = 20


class BuildFailedError(RuntimeError):
    """A build ended in a state other than SUCCEEDED."""


class BuildStillRunningError(RuntimeError):
    """Builds outlasted every stage of the wait; they keep running in CodeBuild."""


def _report_after_seconds() -> float | None:
    """How long one resource waits for the builds (unset: as long as the provider's waiter lets it)."""
    value = os.environ.get("REPORT_AFTER_SECONDS")
    return float(value) if value else None


def _codebuild() -> Any:
    return boto3.client("codebuild")


def _ecr() -> Any:
    return boto3.client("ecr")


def _stage(props: dict[str, Any]) -> tuple[int, int]:
    """(this resource's place in the chain of waits, the chain's length); 1 of 1 when not chained.

    CloudFormation passes numbers in properties as strings.
    """
    try:
        stage, stages = int(props.get("WaitStage", 1)), int(props.get("WaitStages", 1))
    except (TypeError, ValueError) as error:
        raise ValueError("properties WaitStage and WaitStages must be whole numbers") from error
    if not 1 <= stage <= stages:
        raise ValueError(f"property WaitStage must be between 1 and WaitStages ({stages}), not {stage}")
    return stage, stages


def _builds(props: dict[str, Any]) -> list[dict[str, Any]]:
    """The `Builds` property: a non-empty list of objects, each naming its CodeBuild `Project`."""
    builds = props.get("Builds")
    if (
        not isinstance(builds, list)
        or not builds
        or not all(isinstance(b, dict) and isinstance(b.get("Project"), str) and b["Project"] for b in builds)
    ):
        raise ValueError("property Builds must be a non-empty list of {Project, Outputs?} objects")
    return builds


def _physical_id(props: dict[str, Any], builds: list[dict[str, Any]]) -> str:
    """The given PhysicalResourceId, or for image builds one made of their tags.

    Image tags carry the source hash, so a code change is a replacement that CloudFormation
    records, and a rollback keeps the old images.
    """
    given = props.get("PhysicalResourceId")
    if isinstance(given, str) and given:
        return given
    if all("ImageUri" in b for b in builds):
        return ("images-" + "-".join(b["ImageUri"].rsplit(":", 1)[-1] for b in builds))[:1000]
    raise ValueError("property PhysicalResourceId is required unless every build names its ImageUri")


def _outputs(builds: list[dict[str, Any]]) -> dict[str, str]:
    """What the resource returns once the builds succeeded: each build's Outputs, and image URIs."""
    data: dict[str, str] = {}
    for build in builds:
        if "Accelerator" in build and "ImageUri" in build:
            data[f"{build['Accelerator']}ImageUri"] = build["ImageUri"]
        data.update(build.get("Outputs") or {})
    return data


def _split_image_uri(image_uri: str) -> tuple[str, str, str]:
    """(registry id, repository name, tag) of `<account>.dkr.ecr.<region>.<suffix>/<repository>:<tag>`."""
    registry, _, rest = image_uri.partition("/")
    repository, _, tag = rest.rpartition(":")
    if not registry or not repository or not tag:
        raise ValueError(f"ImageUri {image_uri!r} is not <registry>/<repository>:<tag>")
    return registry.split(".", 1)[0], repository, tag


def _image_pushed(image_uri: str) -> bool:
    """Whether the repository already holds this tag (tags are immutable: it is the finished image)."""
    registry_id, repository, tag = _split_image_uri(image_uri)
    try:
        _ecr().describe_images(registryId=registry_id, repositoryName=repository, imageIds=[{"imageTag": tag}])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in {"ImageNotFoundException", "RepositoryNotFoundException"}:
            return False
        raise
    return True


def _image_tag_of(build: dict[str, Any]) -> str | None:
    """The IMAGE_TAG a CodeBuild build was started with (the project's environment at start time)."""
    variables = build.get("environment", {}).get("environmentVariables", [])
    return next((v.get("value") for v in variables if v.get("name") == "IMAGE_TAG"), None)


def _latest_build_of_tag(client: Any, project: str, tag: str) -> dict[str, Any] | None:
    """The newest of the project's recent builds that makes `tag`, if any."""
    # Without sortOrder the newest come first; setting it fails on projects with over 100 builds.
    ids = client.list_builds_for_project(projectName=project).get("ids", [])[:RECENT_BUILDS]
    if not ids:
        return None
    found = [b for b in client.batch_get_builds(ids=ids)["builds"] if _image_tag_of(b) == tag]
    return max(found, key=lambda b: b.get("startTime") or datetime.min.replace(tzinfo=UTC), default=None)


def _image_build_id(client: Any, build: dict[str, Any], *, may_start: bool) -> str | None:
    """The build to wait for to get this entry's image, or None when the image is already pushed.

    A build of the same tag still running is reused; a later stage (may_start False) takes the
    newest build of the tag whatever its state, so that a failure is reported with its log link.
    """
    project, image_uri = build["Project"], build["ImageUri"]
    if _image_pushed(image_uri):
        LOG.info("%s is already pushed; no build", image_uri)
        return None
    latest = _latest_build_of_tag(client, project, _split_image_uri(image_uri)[2])
    if latest is not None and (latest.get("buildStatus") == IN_PROGRESS or not may_start):
        LOG.info("waiting for %s, which already makes %s", latest["id"], image_uri)
        return str(latest["id"])
    if not may_start:
        raise BuildFailedError(f"{image_uri} is not in the repository and no build of {project} makes it")
    return str(client.start_build(projectName=project)["build"]["id"])


def on_event(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Start (or find) the builds on Create/Update; nothing to do on Delete."""
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    LOG.info("%s %s: %s", event.get("ResourceType", "builds"), request, json.dumps(props))
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    builds = _builds(props)
    stage, _ = _stage(props)
    if stage > 1 and not all("ImageUri" in b for b in builds):
        raise ValueError("only image builds (each with an ImageUri) can be waited for by a later WaitStage")
    suffix = "" if stage == 1 else f"-wait{stage}"
    physical_id = _physical_id(props, builds)[: 1000 - len(suffix)] + suffix
    client = _codebuild()
    build_ids = []
    for build in builds:
        if "ImageUri" in build:
            build_id = _image_build_id(client, build, may_start=stage == 1)
        else:
            build_id = str(client.start_build(projectName=build["Project"])["build"]["id"])
        if build_id is not None:
            build_ids.append(build_id)
    # WaitStarted: is_complete measures this resource's wait from here.
    data = {"BuildIds": ",".join(build_ids), "WaitStarted": str(time.time())}
    return {"PhysicalResourceId": physical_id, "Data": data}


def is_complete(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Poll the builds: done when all succeeded, an error naming the log link when any failed."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    data = event.get("Data", {})
    if "BuildIds" not in data:
        raise ValueError("no BuildIds from on_event")
    props = event.get("ResourceProperties", {})
    build_ids = [b for b in data["BuildIds"].split(",") if b]
    if not build_ids:  # every image was already pushed
        return {"IsComplete": True, "Data": _outputs(_builds(props))}
    found = _codebuild().batch_get_builds(ids=build_ids)["builds"]
    by_id = {b["id"]: b for b in found}
    missing = [b for b in build_ids if b not in by_id]
    if missing:
        raise BuildFailedError(f"CodeBuild does not know builds {missing}")
    failures = []
    for build_id in build_ids:
        build = by_id[build_id]
        status = build.get("buildStatus", "IN_PROGRESS")
        if status in FAILED_STATES:
            link = build.get("logs", {}).get("deepLink", "(no log link)")
            failures.append(f"{build.get('projectName', build_id)} {status}: {link}")
    if failures:
        raise BuildFailedError("build failed: " + "; ".join(failures))
    outputs = _outputs(_builds(props))
    if all(by_id[b].get("buildStatus") == SUCCEEDED for b in build_ids):
        return {"IsComplete": True, "Data": outputs}
    running = [by_id[b] for b in build_ids if by_id[b].get("buildStatus", IN_PROGRESS) == IN_PROGRESS]
    if not _waited_out(data):
        return {"IsComplete": False}
    stage, stages = _stage(props)
    if stage < stages:
        # This resource's hour is nearly up; the next stage (which depends on this one) waits on.
        LOG.info("stage %d of %d ends with builds still running: %s", stage, stages, _describe(running))
        return {"IsComplete": True, "Data": outputs}
    started = [b["startTime"] for b in running if isinstance(b.get("startTime"), datetime)]
    minutes = f"{(datetime.now(UTC) - min(started)).total_seconds() / 60:.0f} minutes" if started else "the wait"
    raise BuildStillRunningError(
        f"builds still running after {minutes}, longer than their CodeBuild queue and build timeouts should "
        f"allow: {_describe(running)}. A later `cdk deploy` waits for a build still running or reuses its "
        "pushed image, unless this was the stack's first create: its rollback deletes the repository."
    )


def _waited_out(data: dict[str, Any]) -> bool:
    """Whether this resource has waited REPORT_AFTER_SECONDS since on_event (never, when unset)."""
    limit = _report_after_seconds()
    started = data.get("WaitStarted")
    if limit is None or started is None:
        return False
    return time.time() - float(started) >= limit


def _describe(builds: list[dict[str, Any]]) -> str:
    """Each build's project and log link, for messages."""
    return "; ".join(
        f"{b.get('projectName', b['id'])}: {b.get('logs', {}).get('deepLink', '(no log link)')}" for b in builds
    )
