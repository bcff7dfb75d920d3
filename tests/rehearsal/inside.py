"""Runs INSIDE a rehearsal sandbox (tests/rehearsal/sandbox.py), as the sandbox's first process:

    python -m tests.rehearsal.inside /rehearsal/plan.json

It starts a moto server on the sandbox's own loopback (the only network there is), leaves AWS as the
deploy would (buckets, queues, topics; weights staged with the deploy's own staging code; a compiled
prefix where the plan says the compile has run), serves the Kubernetes API over TLS when the pod mounts
its token, then runs the container's command with exactly the environment the plan gives, watches it as
the kubelet would (an exit, or the container's readinessProbe), and writes a report: exit status,
readiness answers, every object the command left in S3, every request it made to the API, where the plan
names folders (`list_files`), the files it left there, and where it asks (`metrics`), what it published to
CloudWatch.
"""

from __future__ import annotations

import json
import os
import shutil
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
    from common.model_store.layout import weights_prefix
    from common.model_store.marker import write_marker
    from common.model_store.stage import dir_fetcher, stage

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
    ecr = _client("ecr", region)
    for name in plan.get("repositories", []):
        ecr.create_repository(repositoryName=name)
    for image in plan.get("images", []):  # pushed by an earlier deploy
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}
        ecr.put_image(repositoryName=image["repository"], imageManifest=json.dumps(manifest), imageTag=image["tag"])
    for staged in plan["staged"]:  # what buildspec's `python -m common.model_store.stage` leaves
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


def _request(url: str, body: Any = None) -> tuple[int, str, dict[str, str]]:
    """A GET, or a POST of `body` as JSON: (HTTP status, body, headers), (0, "", {}) when nothing answers."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode(errors="replace")[:2000], dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:2000], dict(exc.headers)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, "", {}


def cloudwatch_sums(region: str) -> list[dict[str, Any]]:
    """Every metric on the server with the sum of its data points."""
    cloudwatch = _client("cloudwatch", region)
    found = []
    for metric in cloudwatch.list_metrics()["Metrics"]:
        points = cloudwatch.get_metric_statistics(
            **metric, StartTime=time.time() - 3600, EndTime=time.time() + 60, Period=3600, Statistics=["Sum"]
        )["Datapoints"]
        found.append({**metric, "sum": sum(p["Sum"] for p in points)})
    return found


def _probe(url: str) -> tuple[int, str]:
    status, body, _ = _request(url)
    return status, body


def _readiness(plan: dict[str, Any], env: dict[str, str]) -> tuple[int, str]:
    """One run of the container's readinessProbe: (HTTP status, body), or (exit status, output) of an exec."""
    probe = plan["readiness"]
    if "httpGet" in probe:
        return _probe(f"http://127.0.0.1:{probe['httpGet']['port']}{probe['httpGet']['path']}")
    run = subprocess.run(
        probe["exec"]["command"],
        env=env,
        cwd=plan["cwd"],
        capture_output=True,
        text=True,
        timeout=probe.get("timeoutSeconds", 1),
        check=False,
    )
    return run.returncode, (run.stdout + run.stderr)[-2000:]


def watch_service(process: subprocess.Popen[bytes], plan: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """Run the readiness probe as the kubelet would until it passes, until the service reports the expected
    failure, or until the process ends; read the extra paths; then SIGTERM (the pod's stop) and wait."""
    deadline = time.monotonic() + plan["timeout_s"]
    passed = 0 if "exec" in plan["readiness"] else 200
    observed: dict[str, Any] = {"ready": False, "readiness": None}
    while time.monotonic() < deadline and process.poll() is None:
        status, body = _readiness(plan, env)
        observed["readiness"] = {"status": status, "body": body}
        if status == passed:
            observed["ready"] = True
            break
        if plan.get("stop_marker") and plan["stop_marker"] in body:  # failed for the expected reason
            break
        time.sleep(0.5)
    port = plan["readiness"].get("httpGet", {}).get("port")
    observed["paths"] = {path: _request(f"http://127.0.0.1:{port}{path}") for path in plan.get("paths", [])}
    observed["posts"] = {
        path: _request(f"http://127.0.0.1:{port}{path}", body) for path, body in plan.get("posts", {}).items()
    }
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=plan["stop_timeout_s"])
        except subprocess.TimeoutExpired:
            process.kill()
            observed["killed"] = True
    return observed


def _files(folder: Path) -> dict[str, int]:
    """relative path -> size of every file under `folder` (empty when it does not exist)."""
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def _header(headers: dict[str, str], name: str) -> str:
    """A request header by its case-insensitive name ("" when absent)."""
    return next((value for key, value in headers.items() if key.lower() == name), "")


def start_api_server(kube: dict[str, Any]) -> Any:
    """The Kubernetes API stand-in of the controller's tests, over TLS, holding the plan's objects."""
    import ssl

    from tests.routing_controller.fake_kube import FakeKube

    fake = FakeKube()
    for item in kube["objects"]:
        fake.objects[item["path"]] = item["object"]
    for item in kube.get("lists", []):
        fake.lists[item["path"]] = item["items"]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(kube["cert"], kube["key"])
    fake.server.socket = context.wrap_socket(fake.server.socket, server_side=True)
    fake.__enter__()
    return fake


def main(plan_file: str) -> int:
    """Seed, run, watch and report; the report is written even when the command fails."""
    plan = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    from moto.server import ThreadedMotoServer

    started = time.monotonic()
    # A pod that calls no AWS API and runs on the host's network (Spec.network) gets no moto: its port is the host's.
    aws = plan.get("aws", True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=MOTO_PORT, verbose=False) if aws else None
    if server is not None:
        server.start()
    report: dict[str, Any] = {"account": ACCOUNT, "seconds": {}}
    api = start_api_server(plan["kube"]) if plan["kube"] else None
    env = dict(plan["env"])
    hub = None
    if plan.get("hub"):
        from tests.rehearsal.fake_hub import FakeHub

        hub = FakeHub(plan["hub"]["repo_id"], Path(plan["hub"]["folder"]), plan["hub"]["sha"]).__enter__()
        env["HF_ENDPOINT"] = hub.url
    for copy in plan.get("copies", []):  # CodeBuild downloads the source before the build
        shutil.copytree(copy["from"], copy["to"], dirs_exist_ok=True)
    if api is not None:  # what the kubelet sets for the API server's Service
        env["KUBERNETES_SERVICE_HOST"], port = "127.0.0.1", api.server.server_address[1]
        env["KUBERNETES_SERVICE_PORT"] = env["KUBERNETES_SERVICE_PORT_HTTPS"] = str(port)
    try:
        if aws:
            seed(plan)
        report["seconds"]["seeded"] = round(time.monotonic() - started, 1)
        with open(plan["log"], "wb") as log:
            process = subprocess.Popen(plan["argv"], env=env, cwd=plan["cwd"], stdout=log, stderr=subprocess.STDOUT)
            if plan["mode"] == "service":
                report.update(watch_service(process, plan, env))
                report["returncode"] = process.wait()
            else:
                try:
                    report["returncode"] = process.wait(timeout=plan["timeout_s"])
                except subprocess.TimeoutExpired:
                    process.kill()
                    report["returncode"], report["killed"] = process.wait(), True
        report["seconds"]["ran"] = round(time.monotonic() - started, 1)
        # Volumes are the sandbox's own tmpfs: what the command left in them is read here, before they go.
        report["files"] = {folder: _files(Path(folder)) for folder in plan.get("list_files", [])}
        report["s3"] = s3_objects(plan["region"]) if aws else {}
        if aws and plan.get("metrics"):  # what the command published to CloudWatch, after its stop
            report["metrics"] = cloudwatch_sums(plan["region"])
        failed = Path(plan.get("failed_file", "/nonexistent"))
        if failed.is_file():
            report["failed_commands"] = failed.read_text().split("\n")[:-1]
        if hub is not None:
            report["hub_requests"] = hub.requests
        if api is not None:
            report["api_requests"] = [
                {"method": m, "path": path, "authorization": _header(headers, "authorization"), "body": body}
                for m, path, headers, body in api.requests
            ]
    finally:
        Path(plan["report"]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        if api is not None:
            api.__exit__(None, None, None)
        if hub is not None:
            hub.__exit__(None, None, None)
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1]))
