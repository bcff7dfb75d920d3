"""The trial profile's starting gate (`-c profile=trial`, cdk/image/starting_gate.py), run the way its pod runs it:
the manifest's environment, a read-only root with no volume at all, the pod's user, and no network but its own
loopback (the pool's Service name resolves to nothing, as a Service with no ready pod answers nothing). It must
become ready on its health path, give a request the "starting" answer with Retry-After, and, once stopped,
have published the demand of a generation as the pool's `Requests` metric (what wakes the pool from zero). The
rehearsal has no sign-in ConfigMap (the manifest's envFrom), so the gate runs with AUTH off: any generation counts;
tests/starting_gate/test_gate_sign_in.py covers the sign-in in front of the count."""

from __future__ import annotations

import json
import signal

from cdk.image import starting_gate as gate
from common import metric_names
from common.probe_paths import HEALTH_PATH
from tests.rehearsal.sandbox import rehearse

GATE = f"Deployment/{gate.NAME}:gate"
IMAGE_ROUTE = "/"  # the UI's page; every path but the health check is gated alike
GENERATE_ROUTE = "/v1/generate"  # a request for images: the demand that wakes the pool


def test_the_trial_adds_only_the_gate_to_the_rehearsed_containers(stacks, trial_stacks):
    assert set(trial_stacks.containers) - set(stacks.containers) == {GATE}


def test_the_gates_pod_is_read_only_without_volumes_token_or_root(trial_stacks):
    container = trial_stacks.containers[GATE]
    assert container.read_only_root and container.volumes == () and container.secrets == ()
    assert not container.service_account_token
    assert (container.run_as_user, container.run_as_group) == (gate.RUN_AS_USER, gate.RUN_AS_USER)
    assert container.image_kind == "starting-gate"


def test_the_gate_becomes_ready_answers_starting_and_publishes_the_demand(trial_stacks, tmp_path):
    container = trial_stacks.containers[GATE]
    env = container.env
    service = {
        "stop_timeout_s": container.pod_spec["terminationGracePeriodSeconds"],
        "paths": [IMAGE_ROUTE, HEALTH_PATH],
        "posts": {GENERATE_ROUTE: {"prompt": "a lighthouse"}},
        "metrics": True,
    }
    nothing_seeded = tmp_path / "seed"  # the gate reads no weights: no model is uploaded
    nothing_seeded.mkdir()
    outcome = rehearse(
        container,
        tmp_path / "sandbox",
        nothing_seeded,
        region=trial_stacks.values.region,
        resources=trial_stacks.resources,
        service=service,
        timeout_s=90,
    )
    assert outcome.report.get("ready"), outcome

    status, body, headers = outcome.report["paths"][IMAGE_ROUTE]
    assert status == 503, outcome
    answer = json.loads(body)
    assert answer["error"] == "starting", outcome
    assert f"starting, about {env['STARTING_MINUTES']} minutes" in answer["detail"], outcome
    assert {k.lower(): v for k, v in headers.items()}["retry-after"] == env["RETRY_AFTER_SECONDS"], outcome
    post_status, _, _ = outcome.report["posts"][GENERATE_ROUTE]
    assert post_status == 503, outcome
    health_status, _, _ = outcome.report["paths"][HEALTH_PATH]
    assert health_status == 200, outcome

    # SIGTERM stops uvicorn, and the gate flushes what it counted before it exits.
    assert outcome.returncode in (0, -signal.SIGTERM) and "killed" not in outcome.report, outcome
    (unit,) = json.loads(env["DEMAND_UNITS"])
    published = [
        m
        for m in outcome.report.get("metrics", [])
        if (m["Namespace"], m["MetricName"]) == (metric_names.NAMESPACE, metric_names.REQUESTS.name)
    ]
    assert published, outcome
    (metric,) = published
    assert {d["Name"]: d["Value"] for d in metric["Dimensions"]} == unit, outcome
    assert metric["sum"] >= 1, outcome
