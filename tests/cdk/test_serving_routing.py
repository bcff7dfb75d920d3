"""Routing: cost-derived weights against a hand-computed table, and both modes in the synth."""

from __future__ import annotations

import json

import pytest

from cdk.accelerators import NEURON, NVIDIA
from cdk.image.workload import CAPACITY_SERVICE_NAME
from cdk.serving.routing import SERVICE_PORT, CostInput, resolve_weights, weights_from_cost


def test_default_cost_config_matches_hand_computed_table():
    # The pods' instances (inf2.xlarge, g6.xlarge: cdk.json's servingInstanceType<Acc>) at Karpenter's prices:
    # neuron: 0.7582 $/h x 1.6 s / 3600 = 0.00033698 $/image -> 1/c = 2967.5
    # nvidia: 0.8048 $/h x 2.2 s / 3600 = 0.00049182 $/image -> 1/c = 2033.3
    # shares 59.34% / 40.66% -> floors 59 / 40, the leftover point to the largest remainder (nvidia)
    costs = {"neuron": CostInput(0.7582, 1.6), "nvidia": CostInput(0.8048, 2.2)}
    assert costs["neuron"].cost_per_1000_images == pytest.approx(0.33698, abs=1e-5)
    assert costs["nvidia"].cost_per_1000_images == pytest.approx(0.49182, abs=1e-5)
    assert weights_from_cost(costs) == {"neuron": 59, "nvidia": 41}


@pytest.mark.parametrize(
    ("costs", "expected"),
    [
        ({"a": (1.0, 1.0), "b": (1.0, 3.0)}, {"a": 75, "b": 25}),  # 3x cheaper -> 3x the traffic
        ({"a": (2.0, 1.0), "b": (1.0, 2.0)}, {"a": 50, "b": 50}),  # same cost per image
        ({"a": (1.0, 1.0), "b": (1.0, 1.0), "c": (1.0, 1.0)}, {"a": 34, "b": 33, "c": 33}),
        ({"only": (5.0, 9.0)}, {"only": 100}),
    ],
)
def test_weights_table(costs, expected):
    result = weights_from_cost({k: CostInput(*v) for k, v in costs.items()})
    assert result == expected
    assert sum(result.values()) == 100


def test_explicit_weights_win_and_all_zero_is_rejected():
    costs = {"neuron": CostInput(1, 1), "nvidia": CostInput(1, 1)}
    assert resolve_weights((NEURON, NVIDIA), {"neuron": 1, "nvidia": 3}, costs) == {"neuron": 1, "nvidia": 3}
    assert resolve_weights((NVIDIA,), {"neuron": None, "nvidia": None}, costs) == {"nvidia": 100}
    with pytest.raises(ValueError, match="all 0"):
        resolve_weights((NEURON, NVIDIA), {"neuron": 0, "nvidia": 0}, costs)


def test_cost_mode_action_weights_and_services(serving_manifests):
    (ingress,) = [m for m in serving_manifests if m["kind"] == "Ingress"]
    # `/`: the UI and the image API (the OpenAI routes' Exact paths come first: tests/cdk/test_llm_serving.py).
    # The last `/`: the ones before it carry X-Image-Pool conditions (tests/cdk/test_image_edit_route_synth.py).
    root = [p for p in ingress["spec"]["rules"][0]["http"]["paths"] if p["path"] == "/"][-1]
    backend = root["backend"]["service"]
    assert backend["port"] == {"name": "use-annotation"}
    action = json.loads(ingress["metadata"]["annotations"][f"alb.ingress.kubernetes.io/actions.{backend['name']}"])
    groups = action["forwardConfig"]["targetGroups"]
    assert sum(g["weight"] for g in groups) == 100
    services = {
        m["metadata"]["name"]: m
        for m in serving_manifests
        if m["kind"] == "Service" and not m["metadata"]["name"].startswith("llm")
    }
    assert {g["serviceName"] for g in groups} == {"sd-neuron", "sd-gpu"} == set(services)
    for g in groups:
        assert g["servicePort"] == str(SERVICE_PORT)
        assert services[g["serviceName"]]["spec"]["ports"][0]["port"] == SERVICE_PORT
    assert {g["serviceName"]: g["weight"] for g in groups} == {"sd-neuron": 59, "sd-gpu": 41}


def test_capacity_mode_one_service_over_all_pods(capacity_serving):
    manifests = capacity_serving.manifests
    (ingress,) = [m for m in manifests if m["kind"] == "Ingress"]
    assert not any(k.startswith("alb.ingress.kubernetes.io/actions.") for k in ingress["metadata"]["annotations"])
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": CAPACITY_SERVICE_NAME, "port": {"number": SERVICE_PORT}}
    services = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Service"}
    selector = services[CAPACITY_SERVICE_NAME]["spec"]["selector"]
    for deployment in (m for m in manifests if m["kind"] == "Deployment"):
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert services[CAPACITY_SERVICE_NAME]["spec"]["ports"][0]["targetPort"] == "http"


def test_disabled_accelerator_vanishes(capacity_serving):
    text = json.dumps(capacity_serving.manifests)
    assert "sd-neuron" not in text and "aws.amazon.com/neuron" not in text
    assert not [m for m in capacity_serving.manifests if m["kind"] == "Job"]
    scaled = [m["spec"]["scaleTargetRef"]["name"] for m in capacity_serving.manifests if m["kind"] == "ScaledObject"]
    assert scaled == ["sd-gpu"]
    dashboards = capacity_serving.template.find_resources("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboards)
    assert "sd-gpu" in body and "sd-neuron" not in body and "neuroncore" not in body
    alarms = json.dumps(capacity_serving.template.find_resources("AWS::CloudWatch::Alarm"))
    assert "sd-neuron" not in alarms and "sd-gpu" in alarms
    roles = json.dumps(capacity_serving.template.find_resources("AWS::IAM::Role"))
    assert "compiled/" not in roles
