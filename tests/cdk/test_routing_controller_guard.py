"""The routing controller may change only the weighted action of the Ingress, and only to forward to the
accelerators' Services: a ValidatingAdmissionPolicy the API server enforces (RBAC cannot limit a patch to
one annotation). Its CEL is evaluated here with cel-python (RE2 regexes, like the API server's cel-go) on
the synthesized Ingress, patched the way the controller patches it and the ways it must not."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest

from cdk.front_door.ingress import INGRESS_NAME
from cdk.image.serving import ROUTING_CONTROLLER_NAME as IMAGE_CONTROLLER
from cdk.image.serving import WEIGHTED_ACTION_NAME
from cdk.image.workload import deployment_name
from cdk.serving.routing import SERVICE_PORT
from routing_controller import annotation
from tests.support.k8s_schema import validate_all

LBC = "alb.ingress.kubernetes.io/"
ACTION_KEY = annotation.annotation_key(WEIGHTED_ACTION_NAME)


def by_kind(manifests: list[dict[str, Any]], kind: str, owner: str | None = None) -> dict[str, Any]:
    """The one object of `kind` (of the routing controller instance `owner`, when given: with llmEnabled the
    OpenAI routes' instance has a guard of its own, tests/cdk/test_routing_controller_instances.py)."""
    (found,) = [
        m
        for m in manifests
        if m["kind"] == kind and owner in (None, m["metadata"].get("labels", {}).get("app.kubernetes.io/name"))
    ]
    return found


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies the controller's patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(
        {name: celpy.json_to_cel(value) for name, value in activation.items()}
    )


def denials(policy: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The messages of the validations that fail (the API server's Deny)."""
    return [
        v["message"]
        for v in policy["spec"]["validations"]
        if not is_true(evaluate(v["expression"], {"object": new, "oldObject": old}))
    ]


def is_true(result: Any) -> bool:
    """A CEL result that is the boolean true (an evaluation error is not)."""
    return isinstance(result, celpy.celtypes.BoolType) and bool(result)


@pytest.fixture(scope="module")
def guarded(serving):
    """(policy, binding, deployed Ingress) from the default synth (cost-with-failover)."""
    assert serving.config.runs_routing_controller
    return (
        by_kind(serving.manifests, "ValidatingAdmissionPolicy", IMAGE_CONTROLLER),
        by_kind(serving.manifests, "ValidatingAdmissionPolicyBinding", IMAGE_CONTROLLER),
        by_kind(serving.manifests, "Ingress"),
    )


def test_the_policy_and_binding_are_valid_and_bound_to_the_serving_ingress(serving, guarded):
    policy, binding, _ = guarded
    assert validate_all([policy, binding], serving.platform.kubernetes_version) == []
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": serving.config.namespace}}
        },
    }
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["networking.k8s.io"] and rule["resources"] == ["ingresses"]
    assert rule["operations"] == ["UPDATE"] and rule["resourceNames"] == [INGRESS_NAME]


def test_the_policy_is_applied_before_the_controller_can_patch(serving):
    names = [
        m["kind"]
        for m in serving.manifests
        if {"app.kubernetes.io/name": IMAGE_CONTROLLER}.items() <= m["metadata"].get("labels", {}).items()
    ]
    assert names.index("ValidatingAdmissionPolicyBinding") < names.index("Deployment")


def test_only_the_controllers_requests_are_held_to_it(serving, guarded):
    policy, _, _ = guarded
    (condition,) = policy["spec"]["matchConditions"]
    controller = f"system:serviceaccount:{serving.config.namespace}:{IMAGE_CONTROLLER}"
    assert is_true(evaluate(condition["expression"], {"request": {"userInfo": {"username": controller}}}))
    for other in ("kubernetes-admin", f"system:serviceaccount:{serving.config.namespace}:sd-gpu"):
        result = evaluate(condition["expression"], {"request": {"userInfo": {"username": other}}})
        assert isinstance(result, celpy.celtypes.BoolType) and not result


def test_the_controllers_own_weight_change_is_allowed(serving, guarded):
    policy, _, ingress = guarded
    services = list(serving.config.per_accelerator)
    names = [deployment_name(a) for a in serving.platform.accelerators]
    assert len(names) == len(services) == 2
    for weights in ({names[0]: 0, names[1]: 100}, {names[0]: 100, names[1]: 0}, {names[0]: 999, names[1]: 1}):
        patched = merge_patch(ingress, annotation.patch_body(WEIGHTED_ACTION_NAME, weights, SERVICE_PORT))
        assert patched["metadata"]["annotations"][ACTION_KEY] != ingress["metadata"]["annotations"][ACTION_KEY]
        assert denials(policy, ingress, patched) == []


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"annotations": {LBC + "scheme": "internal"}}},
        {"metadata": {"annotations": {LBC + "inbound-cidrs": "0.0.0.0/0"}}},
        {"metadata": {"annotations": {LBC + "wafv2-acl-arn": None}}},
        {"metadata": {"annotations": {LBC + "actions.other": "{}"}}},
        {"metadata": {"labels": {"added": "by-the-controller"}}},
        {"metadata": {"finalizers": ["example.com/hold"]}},
        {"spec": {"ingressClassName": "other"}},
    ],
    ids=["scheme", "inbound-cidrs", "waf-acl-removed", "another-action", "labels", "finalizers", "spec"],
)
def test_any_other_change_is_denied(guarded, patch):
    policy, _, ingress = guarded
    changed = merge_patch(ingress, patch)
    assert changed != ingress
    assert denials(policy, ingress, changed)


@pytest.mark.parametrize(
    "value",
    [
        annotation.encode({"kube-dns": 100}, SERVICE_PORT),
        annotation.encode({"sd-gpu": 50, "attacker": 50}, SERVICE_PORT),
        annotation.encode({"sd-gpu": 100}, 9153),
        '{"type":"redirect","redirectConfig":{"host":"example.com","statusCode":"HTTP_302"}}',
        "",
    ],
    ids=["other-service", "one-extra-service", "other-port", "redirect", "empty"],
)
def test_the_action_may_only_forward_to_the_accelerators_services(guarded, value):
    policy, _, ingress = guarded
    patched = merge_patch(ingress, {"metadata": {"annotations": {ACTION_KEY: value}}})
    assert denials(policy, ingress, patched) == [
        f"{ACTION_KEY} must be a weighted forward action to the accelerators' Services"
    ]
