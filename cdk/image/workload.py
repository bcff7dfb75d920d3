"""The image service's Kubernetes objects, as plain dicts. Pure functions: no CDK, easy to test.

One Deployment, Service, PodDisruptionBudget and ServiceAccount per accelerator, named after
`deployment_name(acc)`, and (capacity mode) one Service across all pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.config.serving import ServingConfig
from cdk.serving.pod_fit import FitSettings, pinned_and_fitting
from cdk.serving.pod_shape import (
    CACHE_DIR,
    INSTANCE_LABEL_KEY,
    KEEP_ALIVE_MARGIN_S,
    POD_CHECKOV_SKIPS,
    Manifest,
    accelerator_deployment,
    accelerator_scheduling,
    base_env,
    compile_cache_env,
    container_security_context,
    device_resources,
    disruption_budget,
    http_probes,
    pod_identity_service_account,
    pod_security_context,
    scratch_volumes,
    service,
)
from cdk.serving.routing import CONTAINER_PORT, PORT_NAME

APP_LABEL: Final = {"app.kubernetes.io/name": "stable-diffusion"}  # shared by every accelerator's pods
CAPACITY_SERVICE_NAME: Final = "sd"  # the Service across all accelerators (capacity mode)
# The Deployment, Service and ServiceAccount of the image service on each accelerator (its DeploymentUnit too).
DEPLOYMENT_NAMES: Final = {"neuron": "sd-neuron", "nvidia": "sd-gpu"}
# The accelerators whose image pods run edits (image to image, inpainting): CUDA runs diffusers' edit pipelines
# (app/backends/diffusers_backend.py); the Neuron backend loads the text-to-image pipeline only and refuses edits
# by name (app/backends/neuron.py, `edit_modes` empty). The front door sends edits only to these (pool_routes.py).
EDITING_ACCELERATORS: Final = frozenset({"nvidia"})


def deployment_name(acc: Accelerator) -> str:
    """The image service's Deployment (and Service, ServiceAccount, metric DeploymentUnit) on `acc`."""
    return DEPLOYMENT_NAMES[acc.name]


def serves_edits(acc: Accelerator) -> bool:
    """Whether the image pods on `acc` run edits (`POST /v1/images/edits`, `init_image`)."""
    return acc.name in EDITING_ACCELERATORS


def selector_labels(acc: Accelerator) -> dict[str, str]:
    """Labels that select exactly one accelerator's pods."""
    return {**APP_LABEL, INSTANCE_LABEL_KEY: deployment_name(acc)}


def service_account_name(acc: Accelerator) -> str:
    """One ServiceAccount per accelerator, so each gets only its own model prefix."""
    return deployment_name(acc)


def service_account(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The pod's ServiceAccount; its IAM role comes from an EKS Pod Identity association."""
    return pod_identity_service_account(service_account_name(acc), selector_labels(acc), cfg)


def accelerator_resources(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """Requests/limits: the accelerator's extended resource plus CPU and memory from config."""
    per = cfg.per_accelerator[acc.name]
    count = cfg.neuron_devices if acc.name == "neuron" else 1
    return device_resources(acc, count, cpu=per.cpu, memory_gi=per.memory_gi)


def fit_settings(acc: Accelerator) -> FitSettings:
    """The settings that size the image pod on `acc`, as a synth-time fit error names them."""
    suffix = acc.name[0].upper() + acc.name[1:]
    return FitSettings(
        pod=f"the image pod on {acc.name}",
        instance_key=f"servingInstanceType{suffix}",
        cpu_key=f"servingCpu{suffix}",
        memory_key=f"servingMemoryGi{suffix}",
        # One GPU per pod on NVIDIA: only the instance can change there.
        devices_key="servingNeuronDevices" if acc.name == "neuron" else f"servingInstanceType{suffix}",
    )


def scheduling(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """nodeSelector + toleration for the accelerator's node pool, and the Neuron scheduler if needed."""
    return accelerator_scheduling(acc, cfg.neuron_devices)


def service_env(
    acc: Accelerator, cfg: ServingConfig, model_uri: str, region: str, lora_uri: str | None = None
) -> list[dict[str, str]]:
    """The service's settings (app/settings.py) by their variable names; `lora_uri` the adapters' prefix."""
    env = [
        {"name": "MODEL_ID", "value": model_uri},
        {"name": "MODEL_NAME", "value": cfg.model_name},  # one name on every accelerator: /v1/models lists it
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
        {"name": "DEPLOYMENT_UNIT", "value": deployment_name(acc)},
        {"name": "MODEL_CACHE_DIR", "value": CACHE_DIR},
    ]
    if acc.name == "neuron":
        compiled = cfg.compile_settings
        # One pod serves every compiled shape (app/backends/neuron.py reads these; the artifacts of each are in a
        # `<W>x<H>/` folder under the compiled prefix).
        env += [
            {"name": "NEURON_BATCH_SIZE", "value": str(compiled.batch_size)},
            {"name": "NEURON_SHAPES", "value": ",".join(compiled.shape_names)},
            {"name": "NEURON_TENSOR_PARALLEL_SIZE", "value": str(compiled.tensor_parallel_size)},
        ]
        if compiled.loras:
            # The adapters the compile fused, at their scales: the only ones a request may name on this pool.
            env.append({"name": "NEURON_LORAS", "value": ",".join(ref.key for ref in compiled.loras)})
    elif acc.name == "nvidia":
        env += compile_cache_env()  # CUDA_COMPILE, when set, compiles at start-up
    if lora_uri is not None:
        # The model store's adapters prefix, mirrored into MODEL_CACHE_DIR at start-up as the weights are.
        env.append({"name": "LORA_DIR", "value": lora_uri})
    return env + base_env(cfg, region)


def probes(acc: Accelerator, cfg: ServingConfig) -> dict[str, Any]:
    """startupProbe sized for model load; readiness on /readiness, liveness on /health."""
    return http_probes(cfg.per_accelerator[acc.name].startup_timeout_s)


def deployment(
    acc: Accelerator,
    cfg: ServingConfig,
    *,
    image: str,
    model_uri: str,
    region: str,
    lora_uri: str | None = None,
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
        "env": service_env(acc, cfg, model_uri, region, lora_uri) + list(extra_env),
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
    # Exactly the instance the pod is sized for and priced at (the NodePool allows whole families).
    pod_spec = pinned_and_fitting(pod_spec, cfg.per_accelerator[acc.name].instance, fit_settings(acc))
    return accelerator_deployment(
        deployment_name(acc),
        cfg,
        accelerator=acc.name,
        instance=cfg.per_accelerator[acc.name].instance,
        selector=selector_labels(acc),
        labels=labels,
        pod_spec=pod_spec,
        skips=POD_CHECKOV_SKIPS,
    )


def accelerator_service(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The Service in front of one accelerator's pods (cost mode targets)."""
    return service(deployment_name(acc), selector_labels(acc), cfg, labels=APP_LABEL)


def capacity_service(cfg: ServingConfig) -> Manifest:
    """The Service across every accelerator's pods (capacity mode target)."""
    return service(CAPACITY_SERVICE_NAME, dict(APP_LABEL), cfg, labels=APP_LABEL)


def pod_disruption_budget(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """At most one pod of an accelerator down at a time for voluntary disruptions.

    maxUnavailable (not minAvailable) so a single-replica Deployment can still be drained by Karpenter.
    """
    return disruption_budget(deployment_name(acc), selector_labels(acc), cfg)
