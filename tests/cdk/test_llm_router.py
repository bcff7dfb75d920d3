"""`llmRouter`: off by default (no router object in the default synth); with a policy, each LLM pool gets vLLM's
router with Kubernetes discovery of its ready pods, a Role that only watches pods, a PDB and a NetworkPolicy that
admits only the load balancer, the Ingress's LLM paths go to the routers, and the WAF blocks the router's admin
paths. cache_aware opens the render routes in the NVIDIA pods' gateways (RENDER_ROUTES) and stops the synth naming the
setting where a Neuron pool is enabled (vLLM 0.13.0 has no render route)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk import versions
from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError
from cdk.config.llm import LlmConfig
from cdk.front_door.waf import ROUTER_ADMIN_PATHS, ROUTER_ADMIN_RULE_NAME
from cdk.llm import engine, router
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.routes import LLM_ACTION_NAME, LLM_PATHS
from cdk.llm.workload import APP_LABEL, selector_labels
from routing_controller.settings import ENV_POOLS
from tests.cdk.conftest import DEFAULT_CONTEXT, DEFAULT_OVERRIDES, REPO_ROOT, resources_of, serving_view, synth

LBC = "alb.ingress.kubernetes.io/"
ON = DEFAULT_CONTEXT | {"llmEnabled": True}
ROUTER_KINDS = ("ServiceAccount", "Role", "RoleBinding", "Service", "PodDisruptionBudget", "Deployment")


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The default synth's settings with `llmRouter` = power_of_two."""
    return serving_view(synth(tmp_path_factory.mktemp("cdk-router"), DEFAULT_OVERRIDES | {"llmRouter": "power_of_two"}))


def named(serving: Any, kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in serving.manifests if m["kind"] == kind}


def test_the_router_is_off_unless_set():
    assert LlmConfig.from_context(ON).router is None
    assert LlmConfig.from_context(ON | {"llmRouter": "power_of_two"}).router == "power_of_two"


def test_a_policy_the_router_setting_does_not_offer_stops_the_synth_naming_the_setting():
    with pytest.raises(ConfigError, match="llmRouter"):
        LlmConfig.from_context(ON | {"llmRouter": "round_robin"})


def test_cache_aware_serves_nvidia_pools_and_stops_the_synth_with_a_neuron_pool():
    assert LlmConfig.from_context(ON | {"llmRouter": "cache_aware"}, accelerators=("nvidia",)).router == "cache_aware"
    with pytest.raises(ConfigError, match=r"'llmRouter' = 'cache_aware'.*neuron: vLLM 0\.13\.0 .* no render route"):
        LlmConfig.from_context(ON | {"llmRouter": "cache_aware"}, accelerators=("neuron", "nvidia"))


def test_the_router_image_installs_the_pinned_wheel():
    lock = (REPO_ROOT / "llm_router" / "requirements.lock").read_text().splitlines()
    assert f"vllm-router=={versions.VLLM_ROUTER_VERSION}" in lock


def test_the_default_synth_has_no_router_object(serving):
    assert not [m for m in serving.manifests if router.ROUTER_LABEL.items() <= m["metadata"].get("labels", {}).items()]
    assert router.ROUTER_NETWORK_POLICY not in named(serving, "NetworkPolicy")


def test_each_pool_gets_a_router_that_discovers_its_ready_pods(routed):
    for acc in routed.platform.accelerators:
        name = router.router_name(acc)
        for kind in ROUTER_KINDS:
            assert name in named(routed, kind), f"{kind} {name}"
        spec = named(routed, "Deployment")[name]["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == name and spec["automountServiceAccountToken"] is True
        (container,) = spec["containers"]
        args = container["args"]
        assert "--policy=power_of_two" in args and "--service-discovery" in args
        selector = args[args.index("--selector") + 1 : args.index("--selector") + 1 + len(selector_labels(acc))]
        assert dict(s.split("=", 1) for s in selector) == selector_labels(acc)
        assert f"--service-discovery-port={GATEWAY_PORT}" in args
        assert f"--service-discovery-namespace={routed.config.namespace}" in args
        assert "--health-check-endpoint=/readiness" in args  # the gateway's readiness, vLLM's behind it
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert container["image"].endswith(":llm-router-" + container["image"].rsplit("-", 1)[-1])


def gateway_env(serving: Any, acc: Any) -> dict[str, str]:
    """The environment of the gateway container of the pool on `acc`."""
    spec = named(serving, "Deployment")[deployment_name(acc)]["spec"]["template"]["spec"]
    (gateway,) = [c for c in spec["containers"] if c["name"] == "gateway"]
    return {e["name"]: e["value"] for e in gateway["env"] if "value" in e}


def test_power_of_two_leaves_the_render_routes_closed(routed):
    for acc in routed.platform.accelerators:
        assert gateway_env(routed, acc)["RENDER_ROUTES"] == "false"


def test_cache_aware_routes_by_prefix_and_opens_the_nvidia_gateways_render_routes(tmp_path):
    nvidia_only = DEFAULT_OVERRIDES | {"accelerators": "nvidia", "llmRouter": "cache_aware"}
    cache_aware = serving_view(synth(tmp_path, nvidia_only))
    (acc,) = cache_aware.platform.accelerators
    (container,) = named(cache_aware, "Deployment")[router.router_name(acc)]["spec"]["template"]["spec"]["containers"]
    assert "--policy=cache_aware" in container["args"]
    assert gateway_env(cache_aware, acc)["RENDER_ROUTES"] == "true"


def test_the_router_may_only_watch_pods_in_its_namespace(routed):
    for acc in routed.platform.accelerators:
        name = router.router_name(acc)
        role = named(routed, "Role")[name]
        assert role["metadata"]["namespace"] == routed.config.namespace
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
        binding = named(routed, "RoleBinding")[name]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": routed.config.namespace}]
    # No cluster-wide grant names a router's account.
    for binding in named(routed, "ClusterRoleBinding").values():
        assert not [s for s in binding.get("subjects", []) if s["name"].endswith("-router")]


def test_only_the_load_balancer_reaches_the_router_and_only_the_router_the_gateways(routed):
    policies = named(routed, "NetworkPolicy")
    to_router = policies[router.ROUTER_NETWORK_POLICY]["spec"]
    assert to_router["podSelector"]["matchLabels"] == router.ROUTER_LABEL
    (rule,) = to_router["ingress"]
    assert rule["from"] and all(set(peer) == {"ipBlock"} for peer in rule["from"])
    to_gateway = policies[router.GATEWAY_FROM_ROUTER_POLICY]["spec"]
    assert to_gateway["podSelector"]["matchLabels"] == APP_LABEL
    assert to_gateway["ingress"][0]["from"] == [{"podSelector": {"matchLabels": router.ROUTER_LABEL}}]
    assert to_gateway["ingress"][0]["ports"] == [{"protocol": "TCP", "port": GATEWAY_PORT}]
    # The load balancer's own policy to the gateways is gone: it reaches the routers only.
    assert "allow-llm-gateway-from-load-balancer" not in policies


def test_the_llm_paths_go_to_the_routers_and_no_path_reaches_their_admin_routes(routed):
    (ingress,) = named(routed, "Ingress").values()
    action = json.loads(ingress["metadata"]["annotations"][f"{LBC}actions.{LLM_ACTION_NAME}"])
    targets = {g["serviceName"] for g in action["forwardConfig"]["targetGroups"]}
    assert targets == {router.router_name(a) for a in routed.platform.accelerators}
    paths = ingress["spec"]["rules"][0]["http"]["paths"]
    to_router = [p for p in paths if p["backend"]["service"]["name"] == LLM_ACTION_NAME]
    assert {p["path"] for p in to_router if p["pathType"] == "Exact"} == set(LLM_PATHS)
    for admin in ROUTER_ADMIN_PATHS:  # the ALB's longest match sends none of them to the router
        assert not [p for p in to_router if p["pathType"] == "Prefix" and admin.startswith(p["path"])]
    # The routing controller still reads ready capacity off the pools' own Deployments.
    controllers = named(routed, "Deployment")
    pools_env = [
        e["value"]
        for d in controllers.values()
        for c in d["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
        if e["name"] == ENV_POOLS
    ]
    for value in pools_env:
        for pool in json.loads(value):
            if pool["service"].endswith("-router"):
                assert pool["deployment"] == pool["service"].removesuffix("-router")
    assert pools_env and {deployment_name(a) for a in routed.platform.accelerators} <= set(controllers)


def test_the_waf_blocks_the_router_admin_paths_before_anything_else_counts(routed):
    (acl,) = resources_of(routed.template.to_json(), "AWS::WAFv2::WebACL").values()
    rules = {r["Name"]: r for r in acl["Properties"]["Rules"]}
    rule = rules[ROUTER_ADMIN_RULE_NAME]
    assert "Block" in rule["Action"]
    statements = rule["Statement"]["OrStatement"]["Statements"]
    blocked = {s["ByteMatchStatement"]["SearchString"] for s in statements}
    assert blocked == set(ROUTER_ADMIN_PATHS)
    for s in statements:
        assert s["ByteMatchStatement"]["PositionalConstraint"] == "STARTS_WITH"
    rate = min(r["Priority"] for r in rules.values() if "RateBasedStatement" in r["Statement"])
    assert rule["Priority"] < rate


def test_a_vllm_whose_render_routes_were_not_read_stops_a_cache_aware_synth(monkeypatch):
    """A bump of the NVIDIA image's vLLM must say how the new version serves the render routes (0.32.0 needs a flag
    that 0.27.1 would refuse) before cache_aware deploys on it."""
    cache_aware = LlmConfig.from_context(ON | {"llmRouter": "cache_aware"}, accelerators=("nvidia",))
    nvidia = ACCELERATORS["nvidia"]
    assert "--uds" in engine.engine_args(nvidia, cache_aware, "/model", socket="/engine.sock")
    monkeypatch.setitem(engine.VLLM_VERSIONS, "nvidia", "0.99.0")
    with pytest.raises(ValueError, match=r"vLLM 0\.99\.0 .*RENDER_ROUTE_FLAGS"):
        engine.engine_args(nvidia, cache_aware, "/model", socket="/engine.sock")
    power_of_two = LlmConfig.from_context(ON | {"llmRouter": "power_of_two"}, accelerators=("nvidia",))
    assert "--uds" in engine.engine_args(nvidia, power_of_two, "/model", socket="/engine.sock")
