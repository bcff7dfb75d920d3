"""The synthesized Ingress sends `POST /v1/images/edits` only to the pools that edit, per routing mode and accelerator
set, and `X-Image-Pool` to the pool it names; every object it applies passes the Kubernetes schema.

The default synth (both accelerators, cost-with-failover) and the variant (NVIDIA alone, capacity) are the session's;
this module adds two synths: capacity mode over both accelerators, and Neuron alone (cost routing).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk import versions
from cdk.front_door.routes import CONDITIONS_PREFIX
from cdk.image.pool_routes import EDITS_ACTION, POOL_HEADER
from cdk.image.serving import WEIGHTED_ACTION_NAME
from cdk.image.workload import CAPACITY_SERVICE_NAME
from common.image_api_paths import IMAGES_EDITS_PATH
from tests.cdk.conftest import ServingSynth, Synth, serving_view, synth
from tests.support.k8s_schema import validate_all
from tests.support.lbc_action import parse_weighted_forward

ACTIONS = "alb.ingress.kubernetes.io/actions."


@pytest.fixture(scope="module")
def capacity_both(tmp_path_factory: pytest.TempPathFactory) -> ServingSynth:
    """cdk.json's accelerators (both), capacity routing."""
    made: Synth = synth(tmp_path_factory.mktemp("cdk-capacity-both"), {"routingMode": "capacity"})
    return serving_view(made)


@pytest.fixture(scope="module")
def neuron_only(tmp_path_factory: pytest.TempPathFactory) -> ServingSynth:
    """The Neuron pool alone, cost routing."""
    made: Synth = synth(tmp_path_factory.mktemp("cdk-neuron-only"), {"accelerators": "neuron", "routingMode": "cost"})
    return serving_view(made)


def the_ingress(view: ServingSynth) -> dict[str, Any]:
    (found,) = [m for m in view.manifests if m["kind"] == "Ingress"]
    return found


def backends(ing: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The backends of `path`'s rules, in the Ingress's order (the order the load balancer controller tries them)."""
    return [p["backend"]["service"] for p in ing["spec"]["rules"][0]["http"]["paths"] if p["path"] == path]


def forwarded(ing: dict[str, Any], action: str) -> dict[str, int]:
    return parse_weighted_forward(ing["metadata"]["annotations"][ACTIONS + action])


@pytest.mark.parametrize(
    ("view", "main"),
    [("serving", {"name": WEIGHTED_ACTION_NAME}), ("capacity_both", {"name": CAPACITY_SERVICE_NAME})],
    ids=["cost-with-failover", "capacity"],
)
def test_a_mixed_pool_sends_edits_to_the_gpu_only(request, view, main):
    synthesized: ServingSynth = request.getfixturevalue(view)
    ing = the_ingress(synthesized)
    (edits,) = backends(ing, IMAGES_EDITS_PATH)
    assert edits == {"name": EDITS_ACTION, "port": {"name": "use-annotation"}}
    assert forwarded(ing, EDITS_ACTION) == {"sd-gpu": 100}
    # `/`: first the pinned pools (header conditions), then every pool.
    roots = backends(ing, "/")
    assert [b["name"] for b in roots] == ["sd-pool-neuron", "sd-pool-nvidia", main["name"]]
    conditions = json.loads(ing["metadata"]["annotations"][CONDITIONS_PREFIX + "sd-pool-nvidia"])
    assert conditions == [
        {"field": "http-header", "httpHeaderConfig": {"httpHeaderName": POOL_HEADER, "values": ["nvidia"]}}
    ]
    assert forwarded(ing, "sd-pool-nvidia") == {"sd-gpu": 100}
    assert forwarded(ing, "sd-pool-neuron") == {"sd-neuron": 100}
    # The Services the actions forward to are applied by the stack.
    services = {m["metadata"]["name"] for m in synthesized.manifests if m["kind"] == "Service"}
    assert {"sd-gpu", "sd-neuron"} <= services
    assert validate_all(synthesized.manifests, versions.KUBERNETES_VERSION) == []


@pytest.mark.parametrize("view", ["capacity_serving", "neuron_only"], ids=["nvidia-only", "neuron-only"])
def test_one_pool_has_no_edit_rule(request, view):
    # NVIDIA alone: `/` edits already. Neuron alone: no pool edits, so edits reach it and are refused by name.
    synthesized: ServingSynth = request.getfixturevalue(view)
    ing = the_ingress(synthesized)
    assert backends(ing, IMAGES_EDITS_PATH) == []
    assert len(backends(ing, "/")) == 1
    assert not [k for k in ing["metadata"]["annotations"] if k.startswith(CONDITIONS_PREFIX)]
    assert validate_all(synthesized.manifests, versions.KUBERNETES_VERSION) == []
