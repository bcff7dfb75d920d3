"""The Kubernetes objects the serving stack applies: schema-valid and wired as intended."""

from __future__ import annotations

import pytest

from cdk import versions
from cdk.accelerators import ACCELERATORS, NODE_LABEL_KEY
from cdk.image.workload import deployment_name
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from cdk.serving.routing import CONTAINER_PORT, SERVICE_PORT
from tests.support.k8s_schema import validate_all


def by_kind(manifests, kind):
    """The image service's objects of `kind` (LLM serving's, named llm-*, are tests/cdk/test_llm_serving.py's)."""
    return {
        m["metadata"]["name"]: m
        for m in manifests
        if m["kind"] == kind and not m["metadata"]["name"].startswith("llm-")
    }


def test_every_object_is_valid_for_the_cluster_version(serving, capacity_serving):
    objects = serving.manifests + capacity_serving.manifests
    kinds = {m["kind"] for m in objects}
    assert {"Deployment", "Service", "Ingress", "ScaledObject", "TriggerAuthentication", "Job"} <= kinds
    assert validate_all(objects, serving.platform.kubernetes_version) == []


def test_schema_check_is_not_blind():
    broken = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [{"port": "eighty"}]}}
    assert validate_all([broken], "1.36")


@pytest.mark.parametrize("name", ["neuron", "nvidia"])
def test_deployment_lands_on_its_node_pool(serving_manifests, name):
    acc = ACCELERATORS[name]
    pod = by_kind(serving_manifests, "Deployment")[deployment_name(acc)]["spec"]["template"]["spec"]
    # Its node pool, and in it the one instance type it is priced at (cdk.json's servingInstanceType<Acc>).
    instance = {"neuron": "inf2.xlarge", "nvidia": "g6.xlarge"}[name]
    assert pod["nodeSelector"] == {NODE_LABEL_KEY: name, INSTANCE_TYPE_LABEL: instance}
    assert {NODE_LABEL_KEY: name} == acc.node_label
    assert {"key": acc.taint_key, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"][acc.resource_name] == container["resources"]["requests"][acc.resource_name]
    other = [a.resource_name for a in ACCELERATORS.values() if a is not acc]
    assert not set(other) & set(container["resources"]["limits"])
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["BACKEND"] == acc.service_backend
    assert env["DEPLOYMENT_UNIT"] == deployment_name(acc)
    assert env["PORT"] == str(CONTAINER_PORT)
    assert env["MODEL_ID"].startswith("s3://")


def test_neuron_uses_compiled_artifacts_and_one_device_the_default_scheduler_places(serving_manifests, serving):
    pod = by_kind(serving_manifests, "Deployment")["sd-neuron"]["spec"]["template"]["spec"]
    assert serving.config.neuron_devices == 1
    assert "schedulerName" not in pod  # one whole device needs no Neuron scheduler extension
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    cfg = serving.config
    settings = cfg.compile_settings
    prefix = f"neuron-sdk-{versions.NEURON_SDK_VERSION}/b{settings.batch_size}-tp{settings.tensor_parallel_size}/"
    assert env["MODEL_ID"].endswith(f"/compiled/sd2-community--stable-diffusion-2-1-base/{prefix}")
    size = ",".join(settings.shape_names)
    assert (env["NEURON_BATCH_SIZE"], env["NEURON_SHAPES"], env["NEURON_TENSOR_PARALLEL_SIZE"]) == (
        str(settings.batch_size),
        size,
        str(settings.tensor_parallel_size),
    )
    assert "NEURON_WIDTH" not in env and "NEURON_HEIGHT" not in env
    (init,) = pod["initContainers"]
    assert init["command"][-1] == "wait" and any(a.endswith(prefix) for a in init["args"])
    assert [a for a in init["args"] if a.startswith("--shape=")] == [f"--shape={n}" for n in settings.shape_names]
    gpu = by_kind(serving_manifests, "Deployment")["sd-gpu"]["spec"]["template"]["spec"]
    assert "schedulerName" not in gpu
    gpu_env = {e["name"]: e["value"] for e in gpu["containers"][0]["env"]}
    assert gpu_env["MODEL_ID"].endswith("/models/sd2-community--stable-diffusion-2-1-base/")
    # Both pools mirror the model's adapters from the store at start-up; no adapter is fused by default.
    for pod_env in (env, gpu_env):
        assert pod_env["LORA_DIR"].startswith("s3://")
        assert pod_env["LORA_DIR"].endswith("/loras/sd2-community--stable-diffusion-2-1-base/")
    assert "NEURON_LORAS" not in env


@pytest.mark.parametrize("name", ["sd-neuron", "sd-gpu"])
def test_probes_drain_and_security(serving_manifests, serving, name):
    cfg = serving.config
    acc = next(a for a in ACCELERATORS.values() if deployment_name(a) == name)
    pod = by_kind(serving_manifests, "Deployment")[name]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readiness", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    startup = c["startupProbe"]
    budget = cfg.per_accelerator[acc.name].startup_timeout_s
    assert startup["periodSeconds"] * startup["failureThreshold"] >= budget
    assert startup["periodSeconds"] * (startup["failureThreshold"] - 1) < budget
    assert c["lifecycle"]["preStop"]["sleep"]["seconds"] == cfg.pre_stop_s
    assert pod["terminationGracePeriodSeconds"] >= cfg.pre_stop_s + cfg.shutdown_grace_s
    assert pod["terminationGracePeriodSeconds"] >= cfg.deregistration_delay_s
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["SHUTDOWN_GRACE_S"] == str(cfg.shutdown_grace_s)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"] + pod.get("initContainers", []):
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert env["MODEL_CACHE_DIR"] in mounts and "/tmp" in mounts
    if name == "sd-gpu":  # torch.compile's kernels (CUDA_COMPILE) go to the sized cache volume, not the 2 GiB /tmp
        for cache in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            assert env[cache].startswith(env["MODEL_CACHE_DIR"] + "/"), cache
    assert pod["serviceAccountName"] in by_kind(serving_manifests, "ServiceAccount")


def test_services_pdbs_and_selectors_match_pods(serving_manifests):
    services = by_kind(serving_manifests, "Service")
    serving_units = {deployment_name(a) for a in ACCELERATORS.values()}  # not the routing controller
    for name, deployment in by_kind(serving_manifests, "Deployment").items():
        if name not in serving_units:
            continue
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        svc = services[name]
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        (port,) = svc["spec"]["ports"]
        assert port["port"] == SERVICE_PORT
        container_ports = {
            p["name"]: p["containerPort"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        }
        assert container_ports[port["targetPort"]] == CONTAINER_PORT
        pdb = by_kind(serving_manifests, "PodDisruptionBudget")[name]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # Each accelerator's Service selects only its own pods.
    neuron_pods = by_kind(serving_manifests, "Deployment")["sd-neuron"]["spec"]["template"]["metadata"]["labels"]
    assert not services["sd-gpu"]["spec"]["selector"].items() <= neuron_pods.items()


def test_namespace_injects_readiness_gates_and_enforces_restricted(serving_manifests, serving):
    ns = by_kind(serving_manifests, "Namespace")[serving.config.namespace]
    assert ns["metadata"]["labels"]["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_ingress_health_timeouts_tls_and_allow_list(serving_manifests, serving):
    cfg = serving.config
    ann = by_kind(serving_manifests, "Ingress")["sd"]["metadata"]["annotations"]
    p = "alb.ingress.kubernetes.io/"
    assert ann[p + "healthcheck-path"] == "/health"
    assert f"idle_timeout.timeout_seconds={cfg.idle_timeout_s}" in ann[p + "load-balancer-attributes"]
    assert cfg.idle_timeout_s >= cfg.request_timeout_s
    assert "access_logs.s3.enabled=true" in ann[p + "load-balancer-attributes"]
    assert ann[p + "target-group-attributes"] == f"deregistration_delay.timeout_seconds={cfg.deregistration_delay_s}"
    assert ann[p + "certificate-arn"] == cfg.front_door.certificate_arn
    assert ann[p + "ssl-redirect"] == "443"
    assert ann[p + "inbound-cidrs"] == "203.0.113.0/24,198.51.100.0/24"


def test_capacity_variant_is_an_internal_http_alb_behind_cloudfront(capacity_serving):
    ann = by_kind(capacity_serving.manifests, "Ingress")["sd"]["metadata"]["annotations"]
    p = "alb.ingress.kubernetes.io/"
    assert ann[p + "scheme"] == "internal"
    assert ann[p + "listen-ports"] == '[{"HTTP":80}]'
    assert p + "certificate-arn" not in ann and p + "ssl-redirect" not in ann
    assert ann[p + "inbound-cidrs"] == "10.20.0.0/16"  # the looked-up VPC's CIDR


def test_compile_job_shape_and_identity(serving_manifests, serving):
    cfg = serving.config
    (job,) = by_kind(serving_manifests, "Job").values()
    pod = job["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    settings = cfg.compile_settings
    assert f"--batch-size={settings.batch_size}" in args
    assert f"--tensor-parallel-size={settings.tensor_parallel_size}" in args
    assert [a for a in args if a.startswith("--shape=")] == [f"--shape={name}" for name in settings.shape_names]
    assert f"--sdk-version={versions.NEURON_SDK_VERSION}" in args
    assert pod["nodeSelector"] == {NODE_LABEL_KEY: "neuron", INSTANCE_TYPE_LABEL: "inf2.8xlarge"}
    assert pod["serviceAccountName"] in by_kind(serving_manifests, "ServiceAccount")
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
