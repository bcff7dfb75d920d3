"""The image routes to a subset of the pools (cdk/image/pool_routes.py): `POST /v1/images/edits` only to the pools
that edit, and `X-Image-Pool: <accelerator>` to the pool it names, on the Ingress the real builder makes (schema
checked), with the image routing controller still moving `weighted` (its guard and its real loop) and unable to
move the pool routes' fixed actions. The synthesized Ingress per mode is in tests/cdk/test_serving_routing.py."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from kubernetes import client

from app.backends.neuron import NeuronBackend
from cdk import versions
from cdk.accelerators import NEURON, NVIDIA, Accelerator
from cdk.config.serving import ServingConfig
from cdk.front_door import routing_controller as rcw
from cdk.front_door.ingress import ingress
from cdk.front_door.routes import CONDITIONS_PREFIX, Routes
from cdk.image import pool_routes as pr
from cdk.image import serving as image_serving
from cdk.image import workload
from cdk.image.serving import WEIGHTED_ACTION_NAME
from cdk.llm.routes import LLM_ACTION_NAME, LLM_PATHS
from cdk.serving.routing import SERVICE_PORT
from routing_controller import annotation
from routing_controller.loop import Controller
from routing_controller.settings import Settings
from tests.cdk.conftest import DEFAULT_CONTEXT
from tests.cdk.test_routing_controller_guard import merge_patch
from tests.cdk.test_routing_controller_instances import denials_for, username
from tests.routing_controller.fake_kube import FakeKube
from tests.routing_controller.objects import deployment, node_claim, pod
from tests.support.k8s_schema import validate_all

IMAGE_WEIGHTS = {"sd-neuron": 59, "sd-gpu": 41}
IMAGE_KEY = annotation.annotation_key(WEIGHTED_ACTION_NAME)
EDITS_KEY = annotation.annotation_key(pr.EDITS_ACTION)


def image_routes(accelerators: tuple[Accelerator, ...], weights: dict[str, int] | None) -> Routes:
    """The image workload's routes as `ImageServing.routes` makes them (no starting gate)."""
    return Routes(
        paths=image_serving.PATHS,
        path_type="Prefix",
        action=WEIGHTED_ACTION_NAME,
        weights=weights,
        capacity_service=workload.CAPACITY_SERVICE_NAME,
        prompt_paths=image_serving.PROMPT_PATHS,
        pool_routes=pr.pool_routes(accelerators, weights, image_serving.PATHS),
    )


def built_ingress(weights: dict[str, int] | None, accelerators=(NEURON, NVIDIA)) -> dict[str, Any]:
    """The real Ingress builder's object with the image routes and the OpenAI routes beside them."""
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    llm = Routes(paths=LLM_PATHS, path_type="Exact", action=LLM_ACTION_NAME, weights={"llm-neuron": 50, "llm-gpu": 50})
    return ingress(
        cfg, routes=[image_routes(accelerators, weights), llm], access_log_bucket=None, vpc_cidr="10.0.0.0/16"
    )


def forwards(ing: dict[str, Any], action: str) -> dict[str, int]:
    return annotation.decode_weights(ing["metadata"]["annotations"][annotation.annotation_key(action)])


def paths_to(ing: dict[str, Any], path: str) -> list[str]:
    """The backends of `path`'s rules, in the order the load balancer controller tries them."""
    return [p["backend"]["service"]["name"] for p in ing["spec"]["rules"][0]["http"]["paths"] if p["path"] == path]


def test_the_edit_capability_is_the_backends():
    # The Neuron backend runs no edit (app/backends/neuron.py); the CDK's fact must say the same.
    (edit_modes,) = [f for f in dataclasses.fields(NeuronBackend) if f.name == "edit_modes"]
    assert (edit_modes.default == frozenset()) == (not workload.serves_edits(NEURON))
    assert workload.serves_edits(NVIDIA)


@pytest.mark.parametrize(
    ("accelerators", "weights"),
    [((NEURON,), {"sd-neuron": 100}), ((NVIDIA,), {"sd-gpu": 100}), ((NEURON,), None), ((NVIDIA,), None)],
    ids=["neuron-cost", "nvidia-cost", "neuron-capacity", "nvidia-capacity"],
)
def test_one_pool_gets_no_pool_route(accelerators, weights):
    # Neuron alone: no pool edits, so no rule (edits are refused by name there); NVIDIA alone: `/` already edits.
    assert pr.pool_routes(accelerators, weights, image_serving.PATHS) == ()


@pytest.mark.parametrize(("weights", "edits"), [(IMAGE_WEIGHTS, {"sd-gpu": 100}), (None, {"sd-gpu": 100})])
def test_a_mixed_pool_sends_edits_to_the_gpu_and_pins_by_header(weights, edits):
    ing = built_ingress(weights)
    assert validate_all([ing], versions.KUBERNETES_VERSION) == []
    assert paths_to(ing, "/v1/images/edits") == [pr.EDITS_ACTION]
    assert forwards(ing, pr.EDITS_ACTION) == edits
    # The header routes come before the plain `/` (the LBC keeps equally long Prefix paths in order).
    main = WEIGHTED_ACTION_NAME if weights is not None else workload.CAPACITY_SERVICE_NAME
    assert paths_to(ing, "/") == ["sd-pool-neuron", "sd-pool-nvidia", main]
    annotations = ing["metadata"]["annotations"]
    for acc, service in ((NEURON, "sd-neuron"), (NVIDIA, "sd-gpu")):
        assert forwards(ing, pr.pin_action(acc)) == {service: 100}
        assert json.loads(annotations[CONDITIONS_PREFIX + pr.pin_action(acc)]) == [
            {"field": "http-header", "httpHeaderConfig": {"httpHeaderName": "X-Image-Pool", "values": [acc.name]}}
        ]
    # The edit rule takes no condition: every edit goes there, whatever the header says.
    assert CONDITIONS_PREFIX + pr.EDITS_ACTION not in annotations
    # The Exact paths come first: the edit rule is never shadowed by a `/`.
    kinds = [p["pathType"] for p in ing["spec"]["rules"][0]["http"]["paths"]]
    assert kinds == sorted(kinds, key=lambda kind: kind != "Exact")


def test_subset_weights_are_the_cost_weights_renormalized():
    weights = {"a": 30, "b": 10, "c": 60}
    assert pr.subset_weights(["a", "b"], weights) == {"a": 75, "b": 25}
    assert pr.subset_weights(["a", "b"], None) == {"a": 50, "b": 50}  # capacity mode: equal shares
    assert pr.subset_weights(["a", "b"], {"a": 0, "b": 0, "c": 1}) == {"a": 50, "b": 50}  # standbys only


def test_an_async_only_gpu_takes_no_edit_route():
    cfg = ServingConfig.from_context(
        DEFAULT_CONTEXT | {"servingAsyncOnlyNvidia": True, "scalingMinReplicasNvidia": 0, "routingMode": "cost"}
    )
    routed = image_serving.routed_accelerators(cfg, (NEURON, NVIDIA))
    assert routed == (NEURON,)
    assert pr.pool_routes(routed, image_serving.routing_weights(cfg, (NEURON, NVIDIA)), image_serving.PATHS) == ()


def test_two_workloads_may_not_share_an_action_name():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    clash = Routes(paths=("/x",), path_type="Exact", action=pr.EDITS_ACTION, weights={"x": 100})
    with pytest.raises(ValueError, match="must be distinct"):
        ingress(
            cfg,
            routes=[image_routes((NEURON, NVIDIA), IMAGE_WEIGHTS), clash],
            access_log_bucket=None,
            vpc_cidr="10.0.0.0/16",
        )


@pytest.fixture(scope="module")
def image_instance() -> list[dict[str, Any]]:
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    routed = image_serving.image_routing((NEURON, NVIDIA), IMAGE_WEIGHTS)
    return rcw.manifests(cfg, image="registry.example/controller:1", routed=routed, region="us-west-2")


def _guard(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in objects if m["kind"] == "ValidatingAdmissionPolicy"]


def test_the_controller_may_not_move_the_edit_route(image_instance):
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    ing = built_ingress(IMAGE_WEIGHTS)
    user = username(cfg, image_serving.ROUTING_CONTROLLER_NAME)
    moved = merge_patch(ing, annotation.patch_body(pr.EDITS_ACTION, {"sd-neuron": 100}, SERVICE_PORT))
    assert denials_for(_guard(image_instance), user, ing, moved)


def test_the_image_loop_fails_over_on_an_ingress_with_pool_routes(image_instance):
    """The real loop, on a stand-in API: the GPU pool has no pod, so `weighted` goes to Neuron; the edit and pin
    routes stay as deployed, and the guard admits the patch."""
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    ing = built_ingress(IMAGE_WEIGHTS)
    (controller,) = [m for m in image_instance if m["kind"] == "Deployment"]
    (container,) = controller["spec"]["template"]["spec"]["containers"]
    settings = Settings.from_env({e["name"]: e["value"] for e in container["env"] if "value" in e})
    ns = settings.namespace

    class Recorder:
        def put_metric_data(self, **kwargs: Any) -> None:
            """CloudWatch: nothing to check here."""

    with FakeKube() as fake:
        fake.objects[f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/{settings.ingress}"] = json.loads(
            json.dumps(ing)
        )
        for p in settings.pools:
            fake.objects[f"/apis/apps/v1/namespaces/{ns}/deployments/{p.deployment}"] = deployment(p.deployment, 1)
        fake.lists[f"/api/v1/namespaces/{ns}/pods"] = [pod("sd-neuron", 0, True)]
        fake.lists["/apis/karpenter.sh/v1/nodeclaims"] = [node_claim("nvidia", "NoCapacity")]
        Controller(
            settings, client.ApiClient(client.Configuration(host=fake.url)), Recorder(), clock=lambda: 0.0
        ).step()
        requests = list(fake.requests)

    (patch,) = [body for method, _, _, body in requests if method == "PATCH"]
    assert patch == annotation.patch_body(WEIGHTED_ACTION_NAME, {"sd-neuron": 100, "sd-gpu": 0}, SERVICE_PORT)
    patched = merge_patch(ing, patch)
    unchanged = {k: v for k, v in ing["metadata"]["annotations"].items() if k != IMAGE_KEY}
    assert {k: v for k, v in patched["metadata"]["annotations"].items() if k != IMAGE_KEY} == unchanged
    assert patched["metadata"]["annotations"][EDITS_KEY] == ing["metadata"]["annotations"][EDITS_KEY]
    user = username(cfg, image_serving.ROUTING_CONTROLLER_NAME)
    assert denials_for(_guard(image_instance), user, ing, patched) == []
