"""The shared shape of a serving pod on an accelerator node, as plain dicts: the namespace, restricted security
contexts, scratch volumes, device requests, scheduling onto an accelerator's nodes, HTTP probes, the Deployment
(without replicas), ClusterIP Service and PodDisruptionBudget. Every workload builds its objects from these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk import versions
from cdk.accelerators import Accelerator, needs_neuron_scheduler
from cdk.checkov import k8s_skip_annotations
from cdk.config.pool_capacity import rolling_update
from cdk.config.serving import ServingConfig
from cdk.instance_types import InstanceType
from cdk.serving.routing import PORT_NAME, SERVICE_PORT
from common.probe_paths import HEALTH_PATH, READINESS_PATH

INSTANCE_LABEL_KEY: Final = "app.kubernetes.io/instance"
CACHE_DIR: Final = "/cache"
# Paths inside the container (emptyDir mounts), not on the machine that synthesizes.
TMP_DIR: Final = "/tmp"  # noqa: S108
SHM_DIR: Final = "/dev/shm"  # noqa: S108
Manifest = dict[str, Any]
# Seconds the service keeps an idle connection beyond the ALB's idle timeout (ingressIdleTimeoutSeconds).
KEEP_ALIVE_MARGIN_S: Final = 5

# Checkov findings on accelerator pods (the image service's, the compile Jobs') that are the design, not an
# oversight (tests/cdk/test_checkov.py).
POD_CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit on purpose: the CFS quota would throttle the pipeline's threads mid-step; "
    "the CPU request reserves the node's cores and memory is limited.",
    "CKV_K8S_15": "IfNotPresent is exact here: image tags are immutable in ECR and name a hash of the "
    "image's inputs, so a cached image is always the right one.",
    "CKV_K8S_43": "Tags are immutable and content-addressed (ECR tag immutability); the digest only exists "
    "after the build that runs during the same deploy.",
}


def namespace(cfg: ServingConfig) -> Manifest:
    """The namespace: restricted pod security enforced; LBC readiness gates injected."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": cfg.namespace,
            "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
                # The LBC adds a readiness gate to each pod so a rollout waits for the ALB target to be healthy.
                "elbv2.k8s.aws/pod-readiness-gate-inject": "enabled",
            },
        },
    }


def pod_identity_service_account(name: str, labels: Mapping[str, str], cfg: ServingConfig) -> Manifest:
    """A ServiceAccount whose pods never call the Kubernetes API (no token mounted; EKS Pod Identity mounts its
    own for the IAM role associated with it)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": cfg.namespace, "labels": dict(labels)},
        "automountServiceAccountToken": False,
    }


def pod_security_context(cfg: ServingConfig) -> dict[str, Any]:
    """Restricted pod-level security: non-root, RuntimeDefault seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": cfg.run_as_user,
        "runAsGroup": cfg.run_as_user,
        "fsGroup": cfg.run_as_user,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Restricted container-level security: read-only root, no escalation, no capabilities."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def scratch_volumes(
    cfg: ServingConfig, *, cache_size_gi: int | None = None, shm: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts): /dev/shm in memory (unless `shm` is false), a writable cache (the service's
    servingCacheSizeGi unless `cache_size_gi` says otherwise) and /tmp on a read-only root."""
    volumes = [
        {
            "name": "cache",
            "emptyDir": {"sizeLimit": f"{cfg.cache_size_gi if cache_size_gi is None else cache_size_gi}Gi"},
        },
        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
    ]
    mounts = [
        {"name": "cache", "mountPath": CACHE_DIR},
        {"name": "tmp", "mountPath": TMP_DIR},
    ]
    if shm:
        volumes.insert(0, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{cfg.shm_size_gi}Gi"}})
        mounts.insert(0, {"name": "dshm", "mountPath": SHM_DIR})
    return volumes, mounts


def device_resources(acc: Accelerator, devices: int, *, cpu: float, memory_gi: int) -> dict[str, Any]:
    """Requests/limits: `devices` of the accelerator's extended resource, CPU and memory."""
    cpu_quantity = f"{int(cpu * 1000)}m"
    memory = f"{memory_gi}Gi"
    return {
        "requests": {"cpu": cpu_quantity, "memory": memory, acc.resource_name: devices},
        # Extended resources must have limit == request; memory limit = request avoids OOM surprises.
        "limits": {"memory": memory, acc.resource_name: devices},
    }


def accelerator_scheduling(acc: Accelerator, devices: int) -> dict[str, Any]:
    """nodeSelector + toleration for the accelerator's node pool, and the Neuron scheduler for a pod that
    asks for `devices` Neuron devices when that needs it."""
    spec: dict[str, Any] = {
        "nodeSelector": acc.node_label,
        "tolerations": [acc.toleration],
    }
    if needs_neuron_scheduler(acc, devices):
        spec["schedulerName"] = versions.NEURON_SCHEDULER_NAME
    return spec


def base_env(cfg: ServingConfig, region: str) -> list[dict[str, str]]:
    """Environment shared by the service and the compile job: region and writable home/caches."""
    return [
        {"name": "AWS_REGION", "value": region},
        {"name": "AWS_DEFAULT_REGION", "value": region},
        {"name": "HOME", "value": TMP_DIR},
        {"name": "XDG_CACHE_HOME", "value": f"{CACHE_DIR}/xdg"},
        {"name": "HF_HOME", "value": f"{CACHE_DIR}/hf"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},  # never reach a third-party hub at start-up
    ]


def compile_cache_env() -> list[dict[str, str]]:
    """torch.compile's caches on the cache volume, for the serving containers (not the Neuron compile Job, whose
    pod template is immutable: a changed one is a new Job, a new compile). They default under HOME or /tmp, the
    2 GiB volume (triton/knobs.py, triton 3.9.0: TRITON_CACHE_DIR; torch 2.13.0
    torch/_inductor/runtime/cache_dir_utils.py: TORCHINDUCTOR_CACHE_DIR)."""
    return [
        {"name": "TRITON_CACHE_DIR", "value": f"{CACHE_DIR}/triton"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": f"{CACHE_DIR}/torchinductor"},
    ]


# Probe periods; the startupProbe allows enough failures that period x failures covers the
# configured model-load budget.
STARTUP_PERIOD_S: Final = 10
READINESS_PERIOD_S: Final = 5
LIVENESS_PERIOD_S: Final = 10


def http_probes(budget: int) -> dict[str, Any]:
    """startupProbe on /readiness that allows `budget` seconds; readiness on /readiness, liveness on
    /health; all on the container's port named PORT_NAME."""

    def http(path: str) -> dict[str, Any]:
        return {"path": path, "port": PORT_NAME}

    return {
        # Until the model is loaded and warmed up /readiness is 503; liveness waits for this to pass.
        "startupProbe": {
            "httpGet": http(READINESS_PATH),
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": -(-budget // STARTUP_PERIOD_S),  # ceiling division
        },
        "readinessProbe": {
            "httpGet": http(READINESS_PATH),
            "periodSeconds": READINESS_PERIOD_S,
            "timeoutSeconds": 3,
            "failureThreshold": 2,
        },
        # /health answers from the event loop; a batch in flight does not block it.
        "livenessProbe": {
            "httpGet": http(HEALTH_PATH),
            "periodSeconds": LIVENESS_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
    }


def accelerator_deployment(
    name: str,
    cfg: ServingConfig,
    *,
    accelerator: str,
    instance: InstanceType,
    selector: Mapping[str, str],
    labels: Mapping[str, str],
    pod_spec: dict[str, Any],
    skips: Mapping[str, str],
) -> Manifest:
    """A Deployment of a workload's pods on accelerator nodes, without `replicas`: its
    ScaledObject owns that. It rolls by surging one pod on an `instance` node where `accelerator`'s pool has room
    for one at its maximum, else one pod down at a time (cdk/config/pool_capacity.py). `skips`: the Checkov
    checks it does not meet, each with its reason."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": cfg.namespace,
            "labels": dict(labels),
            "annotations": k8s_skip_annotations(skips),
        },
        "spec": {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": dict(selector)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": rolling_update(cfg.pool_rooms.get(accelerator), instance),
            },
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def service(name: str, selector: dict[str, str], cfg: ServingConfig, *, labels: Mapping[str, str]) -> Manifest:
    """A ClusterIP Service: port 80 -> the container's port named PORT_NAME."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": cfg.namespace, "labels": dict(labels)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def disruption_budget(name: str, selector: Mapping[str, str], cfg: ServingConfig) -> Manifest:
    """At most one of the selected pods down at a time for voluntary disruptions (maxUnavailable: 1)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": cfg.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
    }
