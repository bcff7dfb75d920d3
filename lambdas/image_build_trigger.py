"""Custom resource that builds the service images during `cdk deploy` (CDK provider framework).

`on_event` starts one CodeBuild build per project on Create/Update and returns their ids;
`is_complete` polls them until all succeed, and fails the deployment with the failed build's log
link otherwise. CloudFormation waits at most an hour for a custom resource, so once builds have run
REPORT_AFTER_SECONDS it stops waiting and says which are still running: they go on in CodeBuild,
push their image, and the next deploy finds it already pushed. Delete does nothing: the images
stay in ECR and its lifecycle rule expires them.
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


def _builds(props: dict[str, Any]) -> list[dict[str, str]]:
    """The `Builds` property: [{"Project": name, "ImageUri": uri, "Accelerator": name}, ...]."""
    builds = props.get("Builds")
    if not isinstance(builds, list) or not builds:
        raise ValueError("property Builds must be a non-empty list of {Project, ImageUri, Accelerator}")
    return builds


def on_event(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """Start the builds on Create/Update; nothing to do on Delete."""
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    LOG.info("image build %s: %s", request, json.dumps(props))
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    builds = _builds(props)
    client = _codebuild()
    build_ids = []
    for build in builds:
        started = client.start_build(projectName=build["Project"])
        build_ids.append(started["build"]["id"])
    # A new physical id per image set: the source hash is in the tags, so a code change is a
    # replacement that CloudFormation records, and a rollback keeps the old images.
    physical_id = "images-" + "-".join(b["ImageUri"].rsplit(":", 1)[-1] for b in builds)
    return {"PhysicalResourceId": physical_id[:1000], "Data": {"BuildIds": ",".join(build_ids)}}


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
        raise BuildFailedError("image build failed: " + "; ".join(failures))
    if all(by_id[b].get("buildStatus") == SUCCEEDED for b in build_ids):
        props = event.get("ResourceProperties", {})
        data = {f"{b['Accelerator']}ImageUri": b["ImageUri"] for b in _builds(props)}
        return {"IsComplete": True, "Data": data}
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
        f"image builds still running after {elapsed / 60:.0f} minutes, longer than a deployment can wait: "
        f"{names}. They continue in CodeBuild and push their images; run `cdk deploy` again once they "
        "have finished, and it reuses the pushed images."
    )
