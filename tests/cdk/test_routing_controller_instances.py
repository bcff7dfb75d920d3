"""The routing controller's workload serves two routed actions: the image routes' (`sd-routing-controller`,
unchanged) and the OpenAI routes' (`llm-routing-controller`). Each instance's admission guard, evaluated with
cel-python on an Ingress carrying both actions, lets its ServiceAccount change only its own action, and only
to its own pools' Services; the real loop of the LLM instance makes a change its guard and RBAC allow, and
publishes RoutingWeight per `llm-*` unit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA
from cdk.config.serving import ServingConfig
from cdk.front_door import routing_controller as rcw
from cdk.front_door.ingress import INGRESS_NAME, ingress
from cdk.front_door.routes import Routes
from cdk.image import serving as image_serving
from cdk.image.serving import ROUTING_CONTROLLER_NAME as IMAGE_CONTROLLER
from cdk.image.serving import WEIGHTED_ACTION_NAME
from cdk.llm import routes as llm_routes
from cdk.llm.routes import LLM_ACTION_NAME, LLM_PATHS
from cdk.llm.routes import ROUTING_CONTROLLER_NAME as LLM_CONTROLLER
from cdk.serving.routing import SERVICE_PORT
from common import metric_names
from routing_controller import annotation
from routing_controller.loop import Controller
from routing_controller.settings import Pool, Settings
from tests.cdk.conftest import DEFAULT_CONTEXT
from tests.cdk.test_routing_controller_guard import evaluate, is_true, merge_patch
from tests.cdk.test_serving_routing_controller import _allowed, _request_attributes
from tests.routing_controller.fake_kube import FakeKube
from tests.routing_controller.objects import deployment, node_claim, pod
from tests.support.k8s_schema import validate_all

# Captured from rcw.manifests at commit c58af9a, before the workload was parametrized by RoutedAction.
GOLDEN = Path(__file__).parent / "golden" / "routing_controller_sd.json"
GOLDEN_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/sd-on-eks/stable-diffusion:routing-controller-" + "ab" * 32
GOLDEN_CASES = {
    "default": ({}, {"sd-neuron": 43, "sd-gpu": 57}),
    "other-namespace-one-pool": (
        {"servingNamespace": "imagesvc", "routingPeriodSeconds": 30, "routingHoldSeconds": 300, "routingBandPods": 2},
        {"sd-gpu": 100},
    ),
}
IMAGE_WEIGHTS = {"sd-neuron": 43, "sd-gpu": 57}
LLM_WEIGHTS = {"llm-neuron": 57, "llm-gpu": 43}
ACCELERATORS = (NEURON, NVIDIA)
REGION = "us-west-2"
IMAGE_KEY = annotation.annotation_key(WEIGHTED_ACTION_NAME)
LLM_KEY = annotation.annotation_key(LLM_ACTION_NAME)


@pytest.fixture(scope="module")
def cfg() -> ServingConfig:
    return ServingConfig.from_context(DEFAULT_CONTEXT)


@pytest.fixture(scope="module")
def instances(cfg: ServingConfig) -> dict[str, list[dict[str, Any]]]:
    """Both instances' objects, as the stack makes them with LLM serving on."""
    return {
        "image": rcw.manifests(
            cfg, image=GOLDEN_IMAGE, routed=image_serving.image_routing(ACCELERATORS, IMAGE_WEIGHTS), region=REGION
        ),
        "llm": rcw.manifests(
            cfg, image=GOLDEN_IMAGE, routed=llm_routes.llm_routing(ACCELERATORS, LLM_WEIGHTS), region=REGION
        ),
    }


@pytest.fixture(scope="module")
def both_actions(cfg: ServingConfig) -> dict[str, Any]:
    """The real Ingress builder's object with the image routes' and the OpenAI routes' weighted actions."""
    routes = [
        Routes(paths=image_serving.PATHS, path_type="Prefix", action=WEIGHTED_ACTION_NAME, weights=IMAGE_WEIGHTS),
        Routes(paths=LLM_PATHS, path_type="Exact", action=LLM_ACTION_NAME, weights=LLM_WEIGHTS),
    ]
    return ingress(cfg, routes=routes, access_log_bucket=None, vpc_cidr="10.0.0.0/16")


def by_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [m for m in manifests if m["kind"] == kind]
    return found


def username(cfg: ServingConfig, name: str) -> str:
    return f"system:serviceaccount:{cfg.namespace}:{name}"


def denials_for(policies: list[dict[str, Any]], user: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What the API server denies of `user`'s update: every policy whose match condition holds for the user."""
    found = []
    for policy in policies:
        (condition,) = policy["spec"]["matchConditions"]
        if not is_true(evaluate(condition["expression"], {"request": {"userInfo": {"username": user}}})):
            continue
        for v in policy["spec"]["validations"]:
            if not is_true(evaluate(v["expression"], {"object": new, "oldObject": old})):
                found.append(v["message"])
    return found


def policies(instances: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [by_kind(objects, "ValidatingAdmissionPolicy") for objects in instances.values()]


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_the_image_instance_is_byte_identical_to_before(case):
    overrides, weights = GOLDEN_CASES[case]
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT | overrides)
    before = GOLDEN.read_text()
    expected = json.dumps(json.loads(before)[case])
    routed = image_serving.image_routing(ACCELERATORS, weights)
    now = rcw.manifests(cfg, image=GOLDEN_IMAGE, routed=routed, region=REGION)
    assert json.dumps(now) == expected  # key order included


def test_the_llm_instance_is_its_own_set_of_valid_objects(cfg, instances):
    llm = instances["llm"]
    assert [m["kind"] for m in llm] == [m["kind"] for m in instances["image"]]
    assert validate_all(llm, versions.KUBERNETES_VERSION) == []
    for m in llm:
        assert m["metadata"]["labels"] == {"app.kubernetes.io/name": LLM_CONTROLLER}
        assert LLM_CONTROLLER in m["metadata"]["name"]
    identities = [
        {(m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]) for m in v} for v in instances.values()
    ]
    assert not identities[0] & identities[1]  # nothing of one instance overwrites the other's
    pod_spec = by_kind(llm, "Deployment")["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == LLM_CONTROLLER
    for binding in (by_kind(llm, "RoleBinding"), by_kind(llm, "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": LLM_CONTROLLER, "namespace": cfg.namespace}]
    assert by_kind(llm, "ClusterRoleBinding")["roleRef"]["name"] == by_kind(llm, "ClusterRole")["metadata"]["name"]
    assert (
        by_kind(llm, "ValidatingAdmissionPolicyBinding")["spec"]["policyName"]
        == (by_kind(llm, "ValidatingAdmissionPolicy")["metadata"]["name"])
    )


def test_the_llm_instance_reads_its_action_and_the_deployed_llm_weights(cfg, instances, both_actions):
    (container,) = by_kind(instances["llm"], "Deployment")["spec"]["template"]["spec"]["containers"]
    settings = Settings.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e})
    assert (settings.ingress, settings.action, settings.service_port) == (INGRESS_NAME, LLM_ACTION_NAME, SERVICE_PORT)
    assert settings.pools == (
        Pool(accelerator="neuron", deployment="llm-neuron", service="llm-neuron", node_pool="neuron", cost_weight=57),
        Pool(accelerator="nvidia", deployment="llm-gpu", service="llm-gpu", node_pool="nvidia", cost_weight=43),
    )
    # It starts from what the Ingress is deployed with: no patch while every pool is healthy.
    deployed = annotation.decode_weights(both_actions["metadata"]["annotations"][LLM_KEY])
    assert {p.service: p.cost_weight for p in settings.pools} == deployed


def test_llm_pools_route_only_weighted_accelerators():
    assert llm_routes.llm_pools(ACCELERATORS, {"llm-gpu": 100}) == (
        Pool(accelerator="nvidia", deployment="llm-gpu", service="llm-gpu", node_pool="nvidia", cost_weight=100),
    )
    # The image Services' weights are no LLM pool's.
    assert llm_routes.llm_pools(ACCELERATORS, IMAGE_WEIGHTS) == ()


@pytest.mark.parametrize(
    ("name", "action", "routed", "message"),
    [
        ("LLM controller", LLM_ACTION_NAME, (Pool("a", "d", "s", "a", 1),), "not a DNS label"),
        (
            LLM_CONTROLLER,
            "llm'weighted",
            (Pool("a", "d", "s", "a", 1),),
            "no valid LBC action name",
        ),
        (LLM_CONTROLLER, LLM_ACTION_NAME, (), "no pool"),
        (LLM_CONTROLLER, LLM_ACTION_NAME, (Pool("a", "d", "s|.*", "a", 1),), "distinct DNS labels"),
        (
            LLM_CONTROLLER,
            LLM_ACTION_NAME,
            (Pool("a", "d", "s", "a", 1), Pool("b", "e", "s", "b", 1)),
            "distinct DNS",
        ),
    ],
    ids=["name", "action-quote", "no-pool", "service-regex", "service-twice"],
)
def test_a_routed_action_that_would_break_its_guard_is_refused(name, action, routed, message):
    with pytest.raises(ValueError, match=message):
        rcw.RoutedAction(name=name, action=action, pools=routed)


def test_each_instance_may_make_its_own_change(cfg, instances, both_actions):
    guards = policies(instances)
    for name, action, weights in (
        (IMAGE_CONTROLLER, WEIGHTED_ACTION_NAME, {"sd-neuron": 0, "sd-gpu": 100}),
        (LLM_CONTROLLER, LLM_ACTION_NAME, {"llm-neuron": 100, "llm-gpu": 0}),
        (LLM_CONTROLLER, LLM_ACTION_NAME, {"llm-neuron": 1, "llm-gpu": 999}),
    ):
        patched = merge_patch(both_actions, annotation.patch_body(action, weights, SERVICE_PORT))
        assert patched != both_actions
        assert denials_for(guards, username(cfg, name), both_actions, patched) == []


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        (
            LLM_CONTROLLER,
            IMAGE_KEY,
            annotation.encode({"sd-neuron": 0, "sd-gpu": 100}, SERVICE_PORT),
        ),
        (LLM_CONTROLLER, IMAGE_KEY, None),
        (
            IMAGE_CONTROLLER,
            LLM_KEY,
            annotation.encode({"llm-neuron": 0, "llm-gpu": 100}, SERVICE_PORT),
        ),
        (IMAGE_CONTROLLER, LLM_KEY, None),
        (LLM_CONTROLLER, LLM_KEY, annotation.encode({"sd-gpu": 100}, SERVICE_PORT)),
        (LLM_CONTROLLER, LLM_KEY, annotation.encode({"llm-gpu": 100}, 8000)),
        (IMAGE_CONTROLLER, IMAGE_KEY, annotation.encode({"llm-gpu": 100}, SERVICE_PORT)),
    ],
    ids=[
        "llm-moves-image-action",
        "llm-removes-image-action",
        "image-moves-llm-action",
        "image-removes-llm-action",
        "llm-action-to-an-image-service",
        "llm-action-to-the-gateway-port",
        "image-action-to-an-llm-service",
    ],
)
def test_no_instance_may_touch_the_other_action_or_forward_outside_its_pools(
    cfg, instances, both_actions, name, key, value
):
    patched = merge_patch(both_actions, {"metadata": {"annotations": {key: value}}})
    assert patched != both_actions
    assert denials_for(policies(instances), username(cfg, name), both_actions, patched)


def test_the_llm_loop_fails_over_within_its_guard_rbac_and_metrics(cfg, instances, both_actions):
    """The real loop of the LLM instance, on a stand-in API: neuron has no capacity, so the OpenAI routes go
    to the GPU pool; the patch is one its guard admits, every call is one its RBAC allows, and RoutingWeight
    is published per llm-* DeploymentUnit."""
    llm = instances["llm"]
    (container,) = by_kind(llm, "Deployment")["spec"]["template"]["spec"]["containers"]
    settings = Settings.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e})
    ns = settings.namespace

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[dict[str, Any]] = []

        def put_metric_data(self, **kwargs: Any) -> None:
            self.calls.append(kwargs)

    cloudwatch = Recorder()
    path = f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/{settings.ingress}"
    with FakeKube() as fake:
        fake.objects[path] = json.loads(json.dumps(both_actions))
        for p in settings.pools:
            fake.objects[f"/apis/apps/v1/namespaces/{ns}/deployments/{p.deployment}"] = deployment(p.deployment, 1)
        fake.lists[f"/api/v1/namespaces/{ns}/pods"] = [pod("llm-gpu", 0, True)]
        fake.lists["/apis/karpenter.sh/v1/nodeclaims"] = [node_claim("neuron", "NoCapacity")]
        Controller(
            settings, client.ApiClient(client.Configuration(host=fake.url)), cloudwatch, clock=lambda: 0.0
        ).step()
        requests = list(fake.requests)

    (patch,) = [body for method, _, _, body in requests if method == "PATCH"]
    assert patch == annotation.patch_body(LLM_ACTION_NAME, {"llm-neuron": 0, "llm-gpu": 100}, SERVICE_PORT)
    patched = merge_patch(both_actions, patch)
    assert patched["metadata"]["annotations"][IMAGE_KEY] == both_actions["metadata"]["annotations"][IMAGE_KEY]
    assert denials_for(policies(instances), username(cfg, LLM_CONTROLLER), both_actions, patched) == []
    for method, request_path, _, _ in requests:
        group, resource, verb, name, namespaced = _request_attributes(method, request_path)
        rules = by_kind(llm, "Role" if namespaced else "ClusterRole")["rules"]
        assert _allowed(rules, group, resource, verb, name), f"{method} {request_path} is not allowed"
    (published,) = cloudwatch.calls
    assert published["Namespace"] == metric_names.NAMESPACE
    assert {
        (d["MetricName"], tuple((x["Name"], x["Value"]) for x in d["Dimensions"]), d["Value"])
        for d in published["MetricData"]
    } == {
        ("RoutingWeight", (("DeploymentUnit", "llm-neuron"), ("Accelerator", "neuron")), 0.0),
        ("RoutingWeight", (("DeploymentUnit", "llm-gpu"), ("Accelerator", "nvidia")), 100.0),
    }
