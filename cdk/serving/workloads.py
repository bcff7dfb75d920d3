"""Kubernetes objects for the service, as plain dicts. Pure functions: no CDK, easy to test.

One Deployment, Service, PodDisruptionBudget and ServiceAccount per accelerator, named after
`Accelerator.deployment_name`, plus the namespace and (capacity mode) one Service across all pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from cdk import versions
from cdk.accelerators import Accelerator
from cdk.checkov import k8s_skip_annotations
from cdk.config.serving import ServingConfig
from cdk.serving.routing import CAPACITY_SERVICE_NAME, CONTAINER_PORT, PORT_NAME, SERVICE_PORT
from common.probe_paths import HEALTH_PATH, READINESS_PATH

APP_LABEL: Final = {"app.kubernetes.io/name": "stable-diffusion"}  # shared by every accelerator's pods
INSTANCE_LABEL_KEY: Final = "app.kubernetes.io/instance"
CACHE_DIR: Final = "/cache"
# Paths inside the container (emptyDir mounts), not on the machine that synthesizes.
TMP_DIR: Final = "/tmp"  # noqa: S108
SHM_DIR: Final = "/dev/shm"  # noqa: S108
Manifest = dict[str, Any]
# Seconds the service keeps an idle connection beyond the ALB's idle timeout (ingressIdleTimeoutSeconds).
KEEP_ALIVE_MARGIN_S: Final = 5

# Checkov findings on the pods that are the design, not an oversight (tests/cdk/test_checkov.py).
POD_CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit on purpose: the CFS quota would throttle the pipeline's threads mid-step; "
    "the CPU request reserves the node's cores and memory is limited.",
    "CKV_K8S_15": "IfNotPresent is exact here: image tags are immutable in ECR and name a hash of the "
    "image's inputs, so a cached image is always the right one.",
    "CKV_K8S_43": "Tags are immutable and content-addressed (ECR tag immutability); the digest only exists "
    "after the build that runs during the same deploy.",
}


def selector_labels(acc: Accelerator) -> dict[str, str]:
    """Labels that select exactly one accelerator's pods."""
    return {**APP_LABEL, INSTANCE_LABEL_KEY: acc.deployment_name}


def service_account_name(acc: Accelerator) -> str:
    """One ServiceAccount per accelerator, so each gets only its own model prefix."""
    return acc.deployment_name


def needs_neuron_scheduler(acc: Accelerator, devices: int) -> bool:
    """The Neuron scheduler extension is needed when a pod asks for more than one Neuron device.

    The default scheduler only counts devices; for multi-device requests the extension picks devices
    that are contiguous on the ring. One `aws.amazon.com/neuron` device (with all its cores) needs no
    extension (aws-neuron/aws-neuron-sdk containers/tutorials/k8s-neuron-scheduler.rst).
    """
    return acc.name == "neuron" and devices > 1


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


def service_account(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The pod's ServiceAccount; its IAM role comes from an EKS Pod Identity association."""
    return pod_identity_service_account(service_account_name(acc), selector_labels(acc), cfg)


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


def accelerator_resources(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """Requests/limits: the accelerator's extended resource plus CPU and memory from config."""
    per = cfg.per_accelerator[acc.name]
    count = cfg.neuron_devices if acc.name == "neuron" else 1
    return device_resources(acc, count, cpu=per.cpu, memory_gi=per.memory_gi)


def device_resources(acc: Accelerator, devices: int, *, cpu: float, memory_gi: int) -> dict[str, Any]:
    """Requests/limits: `devices` of the accelerator's extended resource, CPU and memory."""
    cpu_quantity = f"{int(cpu * 1000)}m"
    memory = f"{memory_gi}Gi"
    return {
        "requests": {"cpu": cpu_quantity, "memory": memory, acc.resource_name: devices},
        # Extended resources must have limit == request; memory limit = request avoids OOM surprises.
        "limits": {"memory": memory, acc.resource_name: devices},
    }


def scheduling(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """nodeSelector + toleration for the accelerator's node pool, and the Neuron scheduler if needed."""
    return accelerator_scheduling(acc, cfg.neuron_devices)


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


def service_env(acc: Accelerator, cfg: ServingConfig, model_uri: str, region: str) -> list[dict[str, str]]:
    """The service's settings (app/settings.py) by their variable names."""
    env = [
        {"name": "MODEL_ID", "value": model_uri},
        {"name": "BACKEND", "value": acc.service_backend},
        {"name": "PORT", "value": str(CONTAINER_PORT)},
        # The ALB keeps idle connections to targets for its idle timeout; the pod must keep them longer.
        {"name": "KEEP_ALIVE_S", "value": str(cfg.idle_timeout_s + KEEP_ALIVE_MARGIN_S)},
        {"name": "MAX_BATCH_SIZE", "value": str(cfg.max_batch_size)},
        {"name": "BATCH_WAIT_MS", "value": f"{cfg.batch_wait_ms:g}"},
        {"name": "QUEUE_SIZE", "value": str(cfg.queue_size)},
        {"name": "REQUEST_TIMEOUT_S", "value": str(cfg.request_timeout_s)},
        {"name": "SHUTDOWN_GRACE_S", "value": str(cfg.shutdown_grace_s)},
        {"name": "METRICS", "value": cfg.metrics_mode},
        {"name": "DEPLOYMENT_UNIT", "value": acc.deployment_name},
        {"name": "MODEL_CACHE_DIR", "value": CACHE_DIR},
    ]
    if acc.name == "neuron":
        shape = cfg.compile_settings
        env += [
            {"name": "NEURON_BATCH_SIZE", "value": str(shape.batch_size)},
            {"name": "NEURON_HEIGHT", "value": str(shape.height)},
            {"name": "NEURON_WIDTH", "value": str(shape.width)},
        ]
    return env + base_env(cfg, region)


# Probe periods; the startupProbe allows enough failures that period x failures covers the
# configured model-load budget.
STARTUP_PERIOD_S: Final = 10
READINESS_PERIOD_S: Final = 5
LIVENESS_PERIOD_S: Final = 10


def probes(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """startupProbe sized for model load; readiness on /readiness, liveness on /health."""
    return http_probes(cfg.per_accelerator[acc.name].startup_timeout_s)


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


def deployment(
    acc: Accelerator,
    cfg: ServingConfig,
    *,
    image: str,
    model_uri: str,
    region: str,
    init_containers: Sequence[dict[str, Any]] = (),
    env_config_maps: Sequence[str] = (),
    extra_env: Sequence[dict[str, str]] = (),
) -> Manifest:
    """The Deployment serving on one accelerator, without `replicas`: its ScaledObject owns that.

    KEDA scales through an HPA, which writes spec.replicas. A manifest that names it would put it
    back to its own value on every `kubectl apply` (each serving update); one that leaves it out
    and never had it in the last-applied annotation leaves the HPA's value alone. A new Deployment
    starts at 1 replica (the API default) until KEDA applies minReplicaCount.

    `env_config_maps`: ConfigMaps whose keys become environment variables (the sign-in settings);
    not optional, so a pod never starts without them. `extra_env` adds settings another part of the
    stack owns (the jobs' JOBS_* variables).
    """
    volumes, mounts = scratch_volumes(cfg)
    labels = {**selector_labels(acc), **acc.node_label}
    container = {
        "name": "sd",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": PORT_NAME, "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "env": service_env(acc, cfg, model_uri, region) + list(extra_env),
        "resources": accelerator_resources(acc, cfg),
        **probes(acc, cfg),
        # The pod keeps serving while the ALB deregisters it; SIGTERM only after that.
        "lifecycle": {"preStop": {"sleep": {"seconds": cfg.pre_stop_s}}},
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    if env_config_maps:
        container["envFrom"] = [{"configMapRef": {"name": name}} for name in env_config_maps]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(acc),
        # The service never calls the Kubernetes API. EKS Pod Identity injects its own projected
        # token (volume eks-pod-identity-token), which does not depend on this setting.
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(cfg),
        "terminationGracePeriodSeconds": cfg.termination_grace_s,
        "containers": [container],
        "volumes": volumes,
        **scheduling(acc, cfg),
    }
    if init_containers:
        pod_spec["initContainers"] = list(init_containers)
    return accelerator_deployment(
        acc.deployment_name,
        cfg,
        selector=selector_labels(acc),
        labels=labels,
        pod_spec=pod_spec,
        skips=POD_CHECKOV_SKIPS,
    )


def accelerator_deployment(
    name: str,
    cfg: ServingConfig,
    *,
    selector: Mapping[str, str],
    labels: Mapping[str, str],
    pod_spec: dict[str, Any],
    skips: Mapping[str, str],
) -> Manifest:
    """A Deployment of pods on accelerator nodes (the image service's, the LLM's), without `replicas`: its
    ScaledObject owns that. `skips`: the Checkov checks it does not meet, each with its reason."""
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
            # Accelerator capacity is scarce: never surge above max, replace one pod at a time.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def service(name: str, selector: dict[str, str], cfg: ServingConfig, labels: Mapping[str, str] = APP_LABEL) -> Manifest:
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


def accelerator_service(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The Service in front of one accelerator's pods (cost mode targets)."""
    return service(acc.deployment_name, selector_labels(acc), cfg)


def capacity_service(cfg: ServingConfig) -> Manifest:
    """The Service across every accelerator's pods (capacity mode target)."""
    return service(CAPACITY_SERVICE_NAME, dict(APP_LABEL), cfg)


def pod_disruption_budget(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """At most one pod of an accelerator down at a time for voluntary disruptions.

    maxUnavailable (not minAvailable) so a single-replica Deployment can still be drained by Karpenter.
    """
    return disruption_budget(acc.deployment_name, selector_labels(acc), cfg)


def disruption_budget(name: str, selector: Mapping[str, str], cfg: ServingConfig) -> Manifest:
    """At most one of the selected pods down at a time for voluntary disruptions (maxUnavailable: 1)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": cfg.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
    }
