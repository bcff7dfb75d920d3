"""What the serving pods may do and who may reach them: no API token, the image's own user, ingress
only to the service port from the VPC, and a CNI that enforces it."""

from __future__ import annotations

import json
import re

from cdk.image.serving import ROUTING_CONTROLLER_NAME as NAME
from cdk.llm import benchmark_job
from cdk.llm.routes import ROUTING_CONTROLLER_NAME as LLM_NAME
from tests.cdk.conftest import REPO_ROOT, resources_of

CONTROLLERS = {NAME, LLM_NAME}  # the image routes' and the OpenAI routes' routing controllers


def _pod_specs(manifests):
    """The serving pods (Stable Diffusion's, the LLM's) and the compile Jobs': none of them calls the Kubernetes
    API (the routing controllers, which do, have their own RBAC tests)."""
    for obj in manifests:
        if obj["kind"] in ("Deployment", "Job") and obj["metadata"]["name"] not in CONTROLLERS:
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def test_no_pod_or_service_account_mounts_a_kubernetes_api_token(serving_manifests):
    specs = dict(_pod_specs(serving_manifests))
    assert specs
    for name, spec in specs.items():
        assert spec["automountServiceAccountToken"] is False, name
    for obj in serving_manifests:
        if obj["kind"] == "ServiceAccount" and obj["metadata"]["name"] not in CONTROLLERS:
            assert obj["automountServiceAccountToken"] is False, obj["metadata"]["name"]


def test_pods_run_as_the_images_own_user(serving_manifests):
    dockerfile = (REPO_ROOT / "app" / "Dockerfile").read_text()
    image_uid = int(re.search(r"^USER (\d+)", dockerfile, re.MULTILINE).group(1))
    for name, spec in _pod_specs(serving_manifests):
        assert spec["securityContext"]["runAsUser"] == image_uid, name
        assert spec["securityContext"]["runAsUser"] >= 10000, f"{name}: a low UID may collide with the host's"


def test_only_the_service_port_is_reachable_and_only_from_address_blocks(serving, serving_manifests):
    policies = {o["metadata"]["name"]: o["spec"] for o in serving_manifests if o["kind"] == "NetworkPolicy"}
    deny = [p for p in policies.values() if p["podSelector"] == {} and "ingress" not in p]
    assert deny and deny[0]["policyTypes"] == ["Ingress"], "no default deny for the namespace"
    # One allow per workload (the image service's pods, the LLM gateways), each the service port only, and for the
    # LLM gateways one more: from the LLM benchmark's pods (tests/cdk/test_llm_benchmark_job.py).
    allows = [p for p in policies.values() if p.get("ingress")]
    from_pods = {
        name for name, p in policies.items() if p.get("ingress") and "podSelector" in p["ingress"][0]["from"][0]
    }
    assert from_pods == ({benchmark_job.NETWORK_POLICY_NAME} if serving.llm is not None else set())
    for allow in allows:
        (rule,) = allow["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    allows = [p for name, p in policies.items() if p.get("ingress") and name not in from_pods]
    assert len(allows) == (2 if serving.llm is not None else 1)
    for allow in allows:
        # Address blocks only (the load balancer's subnets, tests/cdk/test_serving_network_policy.py): no selector.
        assert {tuple(peer) for peer in allow["ingress"][0]["from"]} == {("ipBlock",)}
    containers = [c for _, spec in _pod_specs(serving_manifests) for c in spec["containers"]]
    ports = {p["containerPort"] for c in containers for p in c.get("ports", [])}
    assert ports == {8000}  # vLLM listens on the pod's Unix socket and declares no port
    pods = [
        o
        for o in serving_manifests
        if o["kind"] == "Deployment" and o["metadata"]["name"] in dict(_pod_specs(serving_manifests))
    ]
    for pod in pods:
        labels = pod["spec"]["template"]["metadata"]["labels"]
        selected = [a for a in allows if a["podSelector"]["matchLabels"].items() <= labels.items()]
        assert len(selected) == 1, pod["metadata"]["name"]


def test_the_cni_enforces_network_policies(platform_synth):
    addons = resources_of(platform_synth.raw_templates["SdOnEksCluster"], "AWS::EKS::Addon")
    cni = [a["Properties"] for a in addons.values() if a["Properties"]["AddonName"] == "vpc-cni"]
    assert len(cni) == 1
    assert json.loads(cni[0]["ConfigurationValues"])["enableNetworkPolicy"] == "true"
    assert cni[0]["ResolveConflicts"] == "OVERWRITE"


def test_every_log_group_is_encrypted_with_a_customer_key(platform_synth):
    for name, template in platform_synth.raw_templates.items():
        for logical_id, group in resources_of(template, "AWS::Logs::LogGroup").items():
            assert "KmsKeyId" in group["Properties"], f"{name}/{logical_id}"


def test_the_service_keeps_idle_connections_longer_than_the_alb(serving, serving_manifests):
    (ingress,) = [o for o in serving_manifests if o["kind"] == "Ingress"]
    attributes = ingress["metadata"]["annotations"]["alb.ingress.kubernetes.io/load-balancer-attributes"]
    idle = int(attributes.split("idle_timeout.timeout_seconds=")[1].split(",")[0])
    for name, spec in _pod_specs(serving_manifests):
        env = {e["name"]: e.get("value") for c in spec["containers"] for e in c.get("env", [])}
        if "PORT" in env:
            assert float(env["KEEP_ALIVE_S"]) > idle, name
