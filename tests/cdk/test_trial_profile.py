"""`cdk deploy -c profile=trial`: no LLM objects, no accelerated pod kept up at rest (the pool scales from zero
behind the starting gate), trimmed logging, and the cost at rest the README states."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cdk.cold_start import first_image_minutes
from cdk.composition import workloads_for
from cdk.costs.at_rest import cost_at_rest
from cdk.image import starting_gate
from cdk.image.workload import APP_LABEL
from tests.cdk.conftest import REPO_ROOT, Synth, resources_of
from tests.cdk.manifests import manifests

SERVING, CLUSTER, NETWORK = "SdOnEksServing", "SdOnEksCluster", "SdOnEksNetwork"


@pytest.fixture(scope="module")
def objects(trial_synth: Synth) -> list[dict[str, Any]]:
    return [m for name in (SERVING, CLUSTER) for m in manifests(trial_synth.raw_templates[name])]


def named(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in objects if m["kind"] == kind}


def test_the_trial_has_no_llm_objects(trial_synth: Synth, objects: list[dict[str, Any]]) -> None:
    assert trial_synth.config.llm is None
    text = json.dumps(objects).lower()
    assert "vllm" not in text and "llm-gateway" not in text
    for template in trial_synth.raw_templates.values():
        assert not [rid for rid in template.get("Resources", {}) if rid.startswith("Llm")]


def test_no_accelerated_pod_is_kept_up_at_rest(trial_synth: Synth, objects: list[dict[str, Any]]) -> None:
    scaled = named(objects, "ScaledObject")
    assert set(scaled) == {"sd-gpu"}
    assert scaled["sd-gpu"]["spec"]["minReplicaCount"] == 0
    # No accelerated managed node group (a warm pool): only the system one; Karpenter starts GPU nodes on demand.
    (nodegroup,) = resources_of(trial_synth.raw_templates[CLUSTER], "AWS::EKS::Nodegroup").values()
    assert nodegroup["Properties"]["InstanceTypes"] == ["t3.medium"]
    assert set(named(objects, "NodePool")) == {"nvidia"}
    pool = named(objects, "NodePool")["nvidia"]["spec"]
    assert pool["limits"]["cpu"] in (4, "4")  # one g5/g6.xlarge at most
    requirements = {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"] if "values" in r}
    assert requirements["karpenter.sh/capacity-type"] == ["spot", "on-demand"]


def test_the_one_node_pool_rolls_an_update_in_place(objects: list[dict[str, Any]]) -> None:
    # A surge pod would need a second g6.xlarge that limits.cpu = 4 forbids: the rollout would wait for the pool to
    # scale to zero. One pod down at a time instead (its node stays for the new pod).
    strategy = named(objects, "Deployment")["sd-gpu"]["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def test_the_starting_gate_wakes_the_pool_it_fronts(objects: list[dict[str, Any]]) -> None:
    (ingress,) = named(objects, "Ingress").values()
    backends = {p["backend"]["service"]["name"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]}
    assert backends == {starting_gate.NAME}
    gate = named(objects, "Deployment")[starting_gate.NAME]["spec"]["template"]["spec"]
    assert gate["nodeSelector"] == {"role": "system"}
    env = {e["name"]: e["value"] for e in gate["containers"][0]["env"]}
    assert env["UPSTREAM_URL"] == "http://sd-gpu.sd.svc.cluster.local:80"
    assert env["STARTING_MINUTES"] == str(first_image_minutes()[1])
    # The demand it publishes is what the pool's KEDA trigger reads.
    (trigger,) = [
        t for t in named(objects, "ScaledObject")["sd-gpu"]["spec"]["triggers"] if t["type"] == "aws-cloudwatch"
    ]
    meta = trigger["metadata"]
    reads = dict(zip(meta["dimensionName"].split(";"), meta["dimensionValue"].split(";"), strict=True))
    assert json.loads(env["DEMAND_UNITS"]) == [reads]
    assert meta["metricName"] == "Requests" and meta["minMetricValue"] == "0"
    # The ALB reaches the gate, the gate reaches the pool's pods.
    policies = named(objects, "NetworkPolicy")
    assert (
        policies["allow-starting-gate-from-load-balancer"]["spec"]["podSelector"]["matchLabels"] == starting_gate.LABELS
    )
    to_pods = policies["allow-image-pods-from-starting-gate"]["spec"]
    assert to_pods["podSelector"]["matchLabels"] == APP_LABEL
    assert to_pods["ingress"][0]["from"] == [{"podSelector": {"matchLabels": starting_gate.LABELS}}]


def test_the_gate_signs_in_and_stops_as_the_pool_does(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from starting_gate.settings import GateSettings, load_settings

    deployments = named(objects, "Deployment")
    gate = deployments[starting_gate.NAME]["spec"]["template"]["spec"]
    pool = deployments["sd-gpu"]["spec"]["template"]["spec"]
    (gate_container,), (pool_container,) = gate["containers"], pool["containers"]
    # The sign-in settings the pool reads: the gate serves the browser sign-in and checks tokens before it counts.
    assert gate_container["envFrom"] == pool_container["envFrom"] and gate_container["envFrom"]
    gate_env = {e["name"]: e["value"] for e in gate_container["env"]}
    pool_env = {e["name"]: e["value"] for e in pool_container["env"] if "value" in e}
    # Idle connections outlive the ALB's (no 502 on a reused connection); the drain as long as the pool's.
    for name in ("KEEP_ALIVE_S", "SHUTDOWN_GRACE_S"):
        assert gate_env[name] == pool_env[name]
    assert gate_container["lifecycle"] == pool_container["lifecycle"]
    assert gate["terminationGracePeriodSeconds"] == pool["terminationGracePeriodSeconds"]
    # Every variable is one the gate reads (or boto3 does), and the gate starts with them.
    assert set(gate_env) - {"AWS_REGION", "AWS_DEFAULT_REGION"} <= {n.upper() for n in GateSettings.model_fields}
    for name, value in gate_env.items():
        monkeypatch.setenv(name, value)
    assert load_settings().demand_units == ({"DeploymentUnit": "sd-gpu", "Accelerator": "nvidia"},)


def test_the_trial_logs_less(trial_synth: Synth, objects: list[dict[str, Any]]) -> None:
    (cluster,) = resources_of(trial_synth.raw_templates[CLUSTER], "AWS::EKS::Cluster").values()
    types = [t["Type"] for t in cluster["Properties"]["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert types == ["api", "audit", "authenticator"]
    (flow_log,) = resources_of(trial_synth.raw_templates[NETWORK], "AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "REJECT"
    (addon,) = [
        a
        for a in resources_of(trial_synth.raw_templates[CLUSTER], "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "amazon-cloudwatch-observability"
    ]
    assert json.loads(addon["Properties"]["ConfigurationValues"]) == {"containerLogs": {"enabled": False}}


def test_the_readme_states_the_trials_cost_at_rest_and_time_to_first_image(trial_synth: Synth) -> None:
    config = trial_synth.config
    cost = cost_at_rest(config, (line for w in workloads_for(config) for line in w.kept_up()))
    assert cost.usd_per_hour < 0.40
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"${cost.usd_per_hour:.2f} an hour" in readme
    low, high = first_image_minutes()
    assert re.search(rf"\b{low}-{high} minutes\b", readme)


def test_every_trial_deploy_shown_goes_through_make_deploy() -> None:
    # `cdk deploy` without make passes no deployerArn, so the deployer gets no access entry and no kubectl.
    docs = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    bare = [
        f"{path.name}: {line.strip()}"
        for path in docs
        for line in path.read_text().splitlines()
        if "profile=trial" in line and "cdk deploy" in line
    ]
    assert bare == []
    shown = [p.name for p in docs if 'make deploy DEPLOY_ARGS="-c profile=trial' in p.read_text()]
    assert {"README.md", "trial.md"} <= set(shown)
    recipe = re.search(r"^deploy:.*\n((?:\t.*\n)+)", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe and re.search(r'cdk deploy --all -c deployerArn="\$\$deployer" \$\(DEPLOY_ARGS\)', recipe[1])
