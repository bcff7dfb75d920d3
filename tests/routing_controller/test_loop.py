"""The control loop through the real `kubernetes` client against a loopback API stand-in, and
CloudWatch through moto: the patch it sends, the Event, the log line and the metric."""

from __future__ import annotations

import json
import logging

import boto3
import pytest
from kubernetes import client
from moto import mock_aws

from common import metric_names
from routing_controller import annotation, heartbeat
from routing_controller.loop import EVENT_REASON, Controller
from routing_controller.settings import Pool, Settings, SettingsError, pools_env
from tests.routing_controller.fake_kube import FakeKube
from tests.routing_controller.objects import ACTION, INGRESS, NS, deployment, ingress_object, node_claim, pod
from tests.support.k8s_schema import validate_core

POOLS = (
    Pool("neuron", "sd-neuron", "sd-neuron", "neuron", 65),
    Pool("nvidia", "sd-gpu", "sd-gpu", "nvidia", 35),
)
ENV = {
    "ROUTING_NAMESPACE": NS,
    "ROUTING_INGRESS": INGRESS,
    "ROUTING_ACTION": ACTION,
    "ROUTING_SERVICE_PORT": "80",
    "ROUTING_POOLS": pools_env(POOLS),
    "ROUTING_PERIOD_SECONDS": "10",
    "ROUTING_HOLD_SECONDS": "120",
    "ROUTING_BAND_PODS": "1",
    "ROUTING_METRICS": "cloudwatch",
    "POD_NAME": "sd-routing-controller-abc",
}
INGRESS_PATH = f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses/{INGRESS}"


@pytest.fixture
def cluster():
    with FakeKube() as fake:
        fake.objects[INGRESS_PATH] = ingress_object({"sd-neuron": 65, "sd-gpu": 35})
        for name, replicas in (("sd-neuron", 2), ("sd-gpu", 1)):
            fake.objects[f"/apis/apps/v1/namespaces/{NS}/deployments/{name}"] = deployment(name, replicas)
        fake.lists[f"/api/v1/namespaces/{NS}/pods"] = [
            pod("sd-neuron", 0, True),
            pod("sd-neuron", 1, True),
            pod("sd-gpu", 0, True),
        ]
        fake.lists["/apis/karpenter.sh/v1/nodeclaims"] = []
        yield fake


def controller(fake: FakeKube, cloudwatch, now: list[float]) -> Controller:
    configuration = client.Configuration(host=fake.url)
    return Controller(Settings.from_env(ENV), client.ApiClient(configuration), cloudwatch, clock=lambda: now[0])


@mock_aws
def test_healthy_pools_leave_the_ingress_alone_and_publish_the_weights(cluster):
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    decision = controller(cluster, cloudwatch, [1000.0]).step()
    assert decision.weights == {"neuron": 65, "nvidia": 35}
    assert not cluster.calls("PATCH") and not cluster.calls("POST")
    listed = cloudwatch.list_metrics(Namespace=metric_names.NAMESPACE)["Metrics"]
    published = {(m["MetricName"], frozenset((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in listed}
    assert published == {
        ("RoutingWeight", frozenset({("DeploymentUnit", "sd-neuron"), ("Accelerator", "neuron")})),
        ("RoutingWeight", frozenset({("DeploymentUnit", "sd-gpu"), ("Accelerator", "nvidia")})),
    }


@mock_aws
def test_losing_the_neuron_pods_patches_the_ingress_and_says_why(cluster, caplog):
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    now = [1000.0]
    ctl = controller(cluster, cloudwatch, now)
    ctl.step()
    # Spot takes both Neuron nodes; the replacements cannot launch.
    cluster.lists[f"/api/v1/namespaces/{NS}/pods"] = [
        pod("sd-neuron", 2, False),
        pod("sd-neuron", 3, False),
        pod("sd-gpu", 0, True),
    ]
    cluster.lists["/apis/karpenter.sh/v1/nodeclaims"] = [node_claim("neuron", "InsufficientCapacity")]
    now[0] += 10
    with caplog.at_level(logging.INFO, logger="routing_controller"):
        ctl.step()

    (patch,) = cluster.calls("PATCH")
    _, path, headers, body = patch
    assert path == INGRESS_PATH
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert set(body["metadata"]["annotations"]) == {annotation.annotation_key(ACTION)}
    assert annotation.decode_weights(body["metadata"]["annotations"][annotation.annotation_key(ACTION)]) == {
        "sd-neuron": 0,
        "sd-gpu": 100,
    }
    # The patched Ingress is still a valid Ingress.
    validate_core(cluster.objects[INGRESS_PATH], "1.36")

    (post,) = cluster.calls("POST")
    _, path, _, event = post
    assert path == f"/api/v1/namespaces/{NS}/events"
    assert event["reason"] == EVENT_REASON and event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Ingress" and event["involvedObject"]["name"] == INGRESS
    assert "no ready pod" in event["message"] and "InsufficientCapacity" in event["message"]
    validate_core({**event, "apiVersion": "v1", "kind": "Event"}, "1.36")

    (line,) = [json.loads(r.message) for r in caplog.records if EVENT_REASON in r.message]
    assert line["weights"] == {"sd-neuron": 0, "sd-gpu": 100}
    assert line["previous"] == {"sd-neuron": 65, "sd-gpu": 35}
    assert line["observed"]["neuron"]["ready"] == 0 and line["observed"]["neuron"]["pending"] == 2

    # The next period changes nothing: no second patch, no second Event.
    now[0] += 10
    ctl.step()
    assert len(cluster.calls("PATCH")) == 1 and len(cluster.calls("POST")) == 1


@mock_aws
def test_a_step_makes_no_more_api_calls_than_the_liveness_probe_allows_for(cluster):
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    now = [1000.0]
    ctl = controller(cluster, cloudwatch, now)
    ctl.step()
    cluster.lists[f"/api/v1/namespaces/{NS}/pods"] = [pod("sd-gpu", 0, True)]  # a change: patch and Event too
    cluster.requests.clear()
    now[0] += 10
    ctl.step()
    assert cluster.calls("PATCH")
    assert len(cluster.requests) <= heartbeat.calls_per_step(len(ctl.settings.pools))


@mock_aws
def test_weights_overwritten_by_a_redeploy_are_restored(cluster):
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    cluster.lists[f"/api/v1/namespaces/{NS}/pods"] = [pod("sd-gpu", 0, True)]
    now = [1000.0]
    ctl = controller(cluster, cloudwatch, now)
    ctl.step()
    assert len(cluster.calls("PATCH")) == 1
    # `cdk deploy` re-applies the Ingress with the cost weights.
    cluster.objects[INGRESS_PATH] = ingress_object({"sd-neuron": 65, "sd-gpu": 35})
    now[0] += 10
    ctl.step()
    assert len(cluster.calls("PATCH")) == 2
    (_, _, _, event) = cluster.calls("POST")[-1]
    assert "the Ingress had" in event["message"]


def test_without_karpenter_pools_are_observed_by_pods_only(cluster):
    cluster.missing.add("/apis/karpenter.sh/v1/nodeclaims")
    decision = controller(cluster, None, [1000.0]).step()
    assert decision.weights == {"neuron": 65, "nvidia": 35}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ROUTING_PERIOD_SECONDS", "0"),
        ("ROUTING_HOLD_SECONDS", "soon"),
        ("ROUTING_POOLS", "[]"),
        ("ROUTING_POOLS", '[{"accelerator": "neuron"}]'),
        ("ROUTING_METRICS", "prometheus"),
        ("ROUTING_INGRESS", ""),
    ],
)
def test_bad_settings_name_the_variable(key, value):
    with pytest.raises(SettingsError, match=key):
        Settings.from_env({**ENV, key: value})
