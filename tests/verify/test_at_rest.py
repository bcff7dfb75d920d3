"""`make verify` against a trial at rest: the image pool at zero replicas (KEDA scaled it down), its HPA without
metrics, and the starting gate answering the front door. The pod checks skip with the reason, KEDA's Ready is the
evidence, and the gate's "starting" is accepted where it is the right answer; the same cluster with the pool asked
for one replica and no pod still fails."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import httpx
import pytest

from tests.verify.conftest import OUTPUTS, REGION, REPOSITORY, REPOSITORY_URI, Cluster, deployment, pod, run
from tests.verify.test_front_door import SIGN_IN
from tests.verify.test_platform import push
from verify import front_door, platform, serving
from verify.pools import IMAGE_POD_LABEL
from verify.result import Status
from verify.stacks import SERVING

IMAGE = f"{REPOSITORY_URI}:nvidia-abc"
GATE_LABELS = {"app.kubernetes.io/name": "starting-gate"}
STARTED_S = 60  # the gate is a Python process on a shared, busy machine: wait for it, loosely


def trial_cluster(cluster: Cluster, replicas: int) -> None:
    """The trial's serving namespace: one image pool with `replicas` and no pod of its own, the gate's pod, the
    sign-in ConfigMap, the pool's ScaledObject with an idle HPA, and a routing controller to probe from."""
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=REPOSITORY)
    push("nvidia-abc")
    cluster.add(
        "deployments",
        deployment("sd-gpu", (IMAGE,), replicas=replicas, ready=0, labels=dict([IMAGE_POD_LABEL])),
        deployment("starting-gate", ("public.ecr.aws/docker/library/python:3.13-slim",), labels=GATE_LABELS),
        deployment("sd-routing-controller", service_account="sd-routing-controller"),
    )
    cluster.add("pods", pod("starting-gate-1", labels=GATE_LABELS, image="gate"))
    cluster.add("configmaps", {"metadata": {"name": "sd-auth", "creationTimestamp": "2026-11-26T10:00:00Z"}})
    conditions = [{"type": "Ready", "status": "True"}, {"type": "Active", "status": "False"}]
    cluster.add(
        "scaledobjects.keda.sh",
        {
            "metadata": {"name": "sd-gpu"},
            "spec": {"scaleTargetRef": {"name": "sd-gpu"}},
            "status": {"hpaName": "keda-hpa-sd-gpu", "conditions": conditions},
        },
    )
    # What the HPA reports while its target is at zero: ScalingDisabled, and no current metric at all.
    idle = [{"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled"}]
    cluster.add("horizontalpodautoscalers", {"metadata": {"name": "keda-hpa-sd-gpu"}, "status": {"conditions": idle}})


POD_CHECKS = (platform.pod_identity_token, serving.sign_in_before_pods, serving.network_policy_blocks_pods)


def test_a_pool_at_zero_skips_the_pod_checks_with_the_reason(aws, cluster, make_context):
    trial_cluster(cluster, replicas=0)
    ctx = make_context()
    for check in POD_CHECKS:
        outcome = run(check, ctx)
        assert outcome.status == Status.SKIP, check.__name__
        assert outcome.evidence.startswith("sd-gpu at zero replicas"), outcome.evidence

    images = run(platform.images_pulled, ctx)
    assert images.status == Status.PASS
    assert images.evidence == "pulled none; in ECR, its Deployments at zero replicas: nvidia-abc"
    pods = run(platform.pods_ready_read_only, ctx)
    assert pods.status == Status.PASS and pods.evidence == "1 pods Ready, read-only root"  # the gate's
    keda = run(platform.keda_triggers, ctx)
    assert keda.status == Status.PASS and keda.evidence.startswith("sd-gpu Ready, at zero replicas")


def test_a_pool_asked_for_a_pod_that_has_none_still_fails(aws, cluster, make_context):
    trial_cluster(cluster, replicas=1)
    ctx = make_context()
    for check in POD_CHECKS:
        assert run(check, ctx).status == Status.FAIL, check.__name__
    images = run(platform.images_pulled, ctx)
    assert images.status == Status.FAIL and images.evidence == "pulled none; no pod runs nvidia-abc"
    keda = run(platform.keda_triggers, ctx)
    assert keda.status == Status.FAIL and "has no current value" in keda.evidence


def test_a_not_ready_scaled_object_at_zero_still_fails(aws, cluster, make_context):
    trial_cluster(cluster, replicas=0)
    cluster.state["resources"]["sd"]["scaledobjects.keda.sh"][0]["status"]["conditions"][0]["status"] = "False"
    cluster.save()
    assert run(platform.keda_triggers, make_context()).status == Status.FAIL


def free_port() -> int:
    """A loopback port free at the time of asking (the gate binds it itself a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def gate_at_rest() -> Iterator[str]:
    """The real starting gate (`python -m starting_gate`, as its pod runs it) in front of a pool with no ready
    pod (a bound port that refuses connections); its URL once it answers /health."""
    with socket.socket() as pool:
        pool.bind(("127.0.0.1", 0))
        port = free_port()
        env = {
            **os.environ,
            "PORT": str(port),
            "UPSTREAM_URL": f"http://127.0.0.1:{pool.getsockname()[1]}",
            "DEMAND_UNITS": "[]",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        gate = subprocess.Popen([sys.executable, "-m", "starting_gate"], env=env, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + STARTED_S
            while True:
                assert gate.poll() is None, "the starting gate exited"
                try:
                    if httpx.get(f"{url}health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the starting gate did not answer /health"
                time.sleep(0.2)
            yield url
        finally:
            gate.terminate()
            gate.wait(timeout=STARTED_S)


@pytest.fixture(scope="module")
def gate_url() -> Iterator[str]:
    with gate_at_rest() as url:
        yield url


def gate_outputs(url: str) -> dict[str, dict[str, Any]]:
    outputs: dict[str, dict[str, Any]] = {k: dict(v) for k, v in OUTPUTS.items()}
    outputs[SERVING] |= {"ServiceUrl": url, **SIGN_IN}
    return outputs


def test_the_front_door_checks_recognise_the_starting_gate(gate_url, make_context):
    ctx = make_context(outputs=gate_outputs(gate_url))
    assert run(front_door.health, ctx).status == Status.PASS
    answered = run(front_door.image_api_answers, ctx)
    assert answered.status == Status.PASS and answered.evidence.startswith("GET /v1/info 503 starting")
    anonymous = run(front_door.refuses_anonymous, ctx)
    # Whether the gate refuses an anonymous call itself or answers "starting", no answer is given away.
    assert anonymous.status in (Status.PASS, Status.SKIP), anonymous.evidence
    assert anonymous.status == Status.PASS or "503 starting" in anonymous.evidence


def test_only_the_gates_starting_answer_is_recognised():
    assert front_door.is_starting(httpx.Response(503, json={"error": "starting", "detail": "x"}))
    assert not front_door.is_starting(httpx.Response(503, json={"error": "overloaded"}))
    assert not front_door.is_starting(httpx.Response(503, text="Service Unavailable"))
