"""Custom resource that runs CodeBuild builds during `cdk deploy` and waits for them (CDK provider framework).

Used for the service images (`Custom::ImageBuilds`) and for staging the model weights
(`Custom::ModelStaging`). `on_event` starts one build per entry of `Builds` on Create/Update and
returns their ids; `is_complete` polls them until all succeed, and fails the deployment with the
failed build's log link otherwise. CloudFormation waits at most an hour for a custom resource, so
once builds have run REPORT_AFTER_SECONDS (environment) it stops waiting and says which are still
running: they go on in CodeBuild, and the next deploy finds their work done (an image already pushed,
weights already marked complete). Delete does nothing: what the builds made (images in ECR, weights
in the model store) stays, and their own retention rules apply.

Properties:
    Builds: [{"Project": name, "Outputs": {key: value}?, "Accelerator"?, "ImageUri"?}, ...]
    PhysicalResourceId: optional; the resource's id (a change of it is a replacement)
Image builds pass Accelerator + ImageUri and no PhysicalResourceId: their id is
`images-<tag>-<tag>` and their outputs `<accelerator>ImageUri`, as before this handler was shared.
Plain boto3 only, so the handler runs on the stock Lambda runtime.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SUCCEEDED = "SUCCEEDED"
FAILED_STATES = frozenset({"FAILED", "FAULT", "STOPPED", "TIMED_OUT"})


class BuildFailedError(RuntimeError):
    """A build ended in a state other than SUCCEEDED."""


class BuildStillRunningError(RuntimeError):
    """Builds outlasted what the deployment can wait for; they keep running in CodeBuild."""


def _report_after_seconds() -> float | None:
    """How long builds may run before the deployment stops waiting (unset: as long as the caller waits)."""
    value = os.environ.get("REPORT_AFTER_SECONDS")
    return float(value) if value else None


def _codebuild() -> Any:
    return boto3.client("codebuild")


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


def on_event(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Start the builds on Create/Update; nothing to do on Delete."""
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    LOG.info("%s %s: %s", event.get("ResourceType", "builds"), request, json.dumps(props))
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    builds = _builds(props)
    physical_id = _physical_id(props, builds)
    client = _codebuild()
    build_ids = []
    for build in builds:
        started = client.start_build(projectName=build["Project"])
        build_ids.append(started["build"]["id"])
    return {"PhysicalResourceId": physical_id, "Data": {"BuildIds": ",".join(build_ids)}}


def is_complete(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Poll the builds: done when all succeeded, an error naming the log link when any failed."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    build_ids = [b for b in event.get("Data", {}).get("BuildIds", "").split(",") if b]
    if not build_ids:
        raise ValueError("no BuildIds from on_event")
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
    if all(by_id[b].get("buildStatus") == SUCCEEDED for b in build_ids):
        return {"IsComplete": True, "Data": _outputs(_builds(event.get("ResourceProperties", {})))}
    _stop_waiting_if_overdue([by_id[b] for b in build_ids])
    return {"IsComplete": False}


def _stop_waiting_if_overdue(builds: list[dict[str, Any]]) -> None:
    """Raise BuildStillRunningError once running builds have used up the deployment's wait."""
    limit = _report_after_seconds()
    running = [b for b in builds if b.get("buildStatus", "IN_PROGRESS") == "IN_PROGRESS"]
    started = [b["startTime"] for b in running if isinstance(b.get("startTime"), datetime)]
    if limit is None or not started:
        return
    elapsed = (datetime.now(UTC) - min(started)).total_seconds()
    if elapsed < limit:
        return
    names = "; ".join(
        f"{b.get('projectName', b['id'])}: {b.get('logs', {}).get('deepLink', '(no log link)')}" for b in running
    )
    raise BuildStillRunningError(
        f"builds still running after {elapsed / 60:.0f} minutes, longer than a deployment can wait: "
        f"{names}. They continue in CodeBuild; run `cdk deploy` again once they have finished, and it "
        "reuses what they made."
    )
