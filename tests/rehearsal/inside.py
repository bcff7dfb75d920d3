"""Runs INSIDE a rehearsal sandbox (tests/rehearsal/sandbox.py), as the sandbox's first process:

    python -m tests.rehearsal.inside /rehearsal/plan.json

It starts a moto server on the sandbox's own loopback (the only network there is), leaves AWS as the
deploy would (buckets, queues, topics; weights staged with the deploy's own staging code; a compiled
prefix where the plan says the compile has run), then runs the container's command with exactly the
environment the plan gives, watches it as the kubelet would (an exit, or the readiness probe), and writes
a report: exit status, readiness answers, and every object the command left in S3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3

from tests.rehearsal.pods import ACCOUNT, MOTO_ENDPOINT, MOTO_PORT


def _client(service: str, region: str) -> Any:
    return boto3.client(
        service,
        region_name=region,
        endpoint_url=MOTO_ENDPOINT,
        aws_access_key_id="rehearsal",
        aws_secret_access_key="rehearsal",
    )


def seed(plan: dict[str, Any]) -> None:
    """Create what the deploy creates, and what it leaves in S3 before this container runs."""
    from app.model_store.layout import weights_prefix
    from app.model_store.marker import write_marker
    from app.model_store.stage import dir_fetcher, stage

    region = plan["region"]
    s3, sqs, sns = (_client(s, region) for s in ("s3", "sqs", "sns"))
    for bucket in plan["buckets"]:
        s3.create_bucket(Bucket=bucket) if region == "us-east-1" else s3.create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region}
        )
    for name, url in plan["queues"].items():
        created = sqs.create_queue(QueueName=name)["QueueUrl"]
        assert created == url, f"moto's queue URL {created} is not the rehearsal's {url}"
    for name in plan["topics"]:
        sns.create_topic(Name=name)
    for staged in plan["staged"]:  # what buildspec's `python -m app.model_store.stage` leaves
        with tempfile.TemporaryDirectory() as scratch:
            stage(
                s3,
                bucket=staged["bucket"],
                prefix=weights_prefix(staged["model_id"]),
                fetch=dir_fetcher(Path(staged["from_dir"])),
                scratch=Path(scratch),
            )
    for compiled in plan["compiled"]:  # what a finished compile Job leaves
        for relative, body in compiled["files"].items():
            s3.put_object(Bucket=compiled["bucket"], Key=compiled["prefix"] + relative, Body=body.encode())
        write_marker(s3, compiled["bucket"], compiled["prefix"], compiled["marker"])


def s3_objects(region: str) -> dict[str, dict[str, int]]:
    """bucket -> key -> size, for every object on the server."""
    s3 = _client("s3", region)
    found: dict[str, dict[str, int]] = {}
    for bucket in s3.list_buckets()["Buckets"]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"])
        found[bucket["Name"]] = {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}
    return found


def _probe(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode(errors="replace")[:2000]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:2000]
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


def watch_service(process: subprocess.Popen[bytes], plan: dict[str, Any]) -> dict[str, Any]:
    """Probe as the kubelet would until ready, until the service reports the load failed, or until the
    process ends; then send SIGTERM (the pod's stop) and wait for the drain."""
    deadline = time.monotonic() + plan["timeout_s"]
    base = f"http://127.0.0.1:{plan['port']}"
    observed: dict[str, Any] = {"ready": False, "readiness": None, "health": None}
    while time.monotonic() < deadline and process.poll() is None:
        status, body = _probe(base + plan["readiness_path"])
        observed["readiness"] = {"status": status, "body": body}
        if status == 200:
            observed["ready"] = True
            break
        if status == 503 and plan["stop_marker"] in body:  # the load failed for the expected reason
            break
        time.sleep(0.5)
    observed["health"] = dict(zip(("status", "body"), _probe(base + plan["health_path"]), strict=True))
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=plan["stop_timeout_s"])
        except subprocess.TimeoutExpired:
            process.kill()
            observed["killed"] = True
    return observed


def main(plan_file: str) -> int:
    """Seed, run, watch and report; the report is written even when the command fails."""
    plan = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    from moto.server import ThreadedMotoServer

    started = time.monotonic()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=MOTO_PORT, verbose=False)
    server.start()
    report: dict[str, Any] = {"account": ACCOUNT, "seconds": {}}
    try:
        seed(plan)
        report["seconds"]["seeded"] = round(time.monotonic() - started, 1)
        with open(plan["log"], "wb") as log:
            process = subprocess.Popen(
                plan["argv"], env=plan["env"], cwd=plan["cwd"], stdout=log, stderr=subprocess.STDOUT
            )
            if plan["mode"] == "service":
                report.update(watch_service(process, plan))
                report["returncode"] = process.wait()
            else:
                try:
                    report["returncode"] = process.wait(timeout=plan["timeout_s"])
                except subprocess.TimeoutExpired:
                    process.kill()
                    report["returncode"], report["killed"] = process.wait(), True
        report["seconds"]["ran"] = round(time.monotonic() - started, 1)
        report["s3"] = s3_objects(plan["region"])
    finally:
        Path(plan["report"]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        server.stop()
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1]))
