"""What the serving pods need at creation is created before them (CloudFormation DependsOn).

The load balancer controller injects its readiness gate only into pods created once the Ingress's target
groups exist; the pods read the `sd-auth` ConfigMap (not optional) when they start, and their
ScaledObjects the TriggerAuthentication. The Ingress itself needs the Services it routes to.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk.build import STACK_PREFIX
from cdk.front_door.sign_in import CONFIG_MAP_NAME
from cdk.image.workload import APP_LABEL
from tests.cdk.conftest import resources_of
from tests.cdk.manifests import render

MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
OBJECT_VALUE_TYPE = "Custom::AWSCDK-EKS-KubernetesObjectValue"


def objects_by_resource(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Logical id of each kubectl-applied manifest -> the objects it applies."""
    return {
        logical_id: json.loads(render(resource["Properties"]["Manifest"]))
        for logical_id, resource in resources_of(template, MANIFEST_TYPE).items()
    }


def holder(objects: dict[str, list[dict[str, Any]]], kind: str, name: str | None = None) -> str:
    """The one manifest resource that applies an object of `kind` (and `name`)."""
    found = [
        logical_id
        for logical_id, items in objects.items()
        if any(o["kind"] == kind and (name is None or o["metadata"]["name"] == name) for o in items)
    ]
    assert len(found) == 1, f"{kind} {name}: {found}"
    return found[0]


def depends_on(template: dict[str, Any], logical_id: str) -> set[str]:
    return set(template["Resources"][logical_id].get("DependsOn", []))


@pytest.fixture(params=["platform_synth", "variant_synth"])
def serving_template(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.getfixturevalue(request.param).raw_templates[f"{STACK_PREFIX}Serving"]


def test_serving_pods_are_created_after_the_ingress_its_target_groups_the_config_map_and_trigger_auth(
    serving_template,
):
    objects = objects_by_resource(serving_template)
    ingress = holder(objects, "Ingress")
    trigger_auth = holder(objects, "TriggerAuthentication")
    config_map = holder(objects, "ConfigMap", CONFIG_MAP_NAME)
    (hostname,) = resources_of(serving_template, OBJECT_VALUE_TYPE)  # written once the target groups exist
    deployments = [
        logical_id
        for logical_id, items in objects.items()
        if any(o["kind"] == "Deployment" and APP_LABEL.items() <= o["metadata"]["labels"].items() for o in items)
    ]
    assert deployments
    for logical_id in deployments:
        assert {ingress, trigger_auth, config_map, hostname} <= depends_on(serving_template, logical_id), logical_id


def test_the_ingress_comes_after_the_services_it_routes_to_and_before_any_pod(serving_template):
    objects = objects_by_resource(serving_template)
    ingress = holder(objects, "Ingress")
    services = {
        holder(objects, "Service", o["metadata"]["name"])
        for items in objects.values()
        for o in items
        if o["kind"] == "Service"
    }
    assert services <= depends_on(serving_template, ingress) | {ingress}
    assert "Deployment" not in {o["kind"] for o in objects[ingress]}
    assert not any(o["kind"] == "Deployment" for s in services for o in objects[s])
