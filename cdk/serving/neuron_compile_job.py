"""The Kubernetes Job that compiles the model for Neuron once, and the init container that waits for it.

A Job's pod template is immutable, so the Job's name carries a hash of what it compiles (model,
SDK version, shape, image): a change creates a new Job instead of failing the update, and an
unchanged deploy leaves the finished Job alone. The Job itself skips work when the artifacts exist.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from app.model_store.layout import CompileShape, compiled_prefix
from cdk import versions
from cdk.accelerators import NEURON
from cdk.config.serving import ServingConfig
from cdk.serving.workloads import (
    CACHE_DIR,
    TMP_DIR,
    base_env,
    container_security_context,
    pod_security_context,
    scheduling,
    scratch_volumes,
)

SERVICE_ACCOUNT: Final = "sd-neuron-compile"
WAIT_POLL_S: Final = 15


def compile_shape(cfg: ServingConfig) -> CompileShape:
    """The static shape from config (neuronCompile*)."""
    settings = cfg.compile_settings
    return CompileShape(settings.batch_size, settings.height, settings.width)


def artifact_prefix(cfg: ServingConfig) -> str:
    """Where the compiled artifacts for this config live in the model store."""
    return compiled_prefix(cfg.model_id, versions.NEURON_SDK_VERSION, compile_shape(cfg))


def job_name(cfg: ServingConfig, image: str) -> str:
    """`sd-neuron-compile-<hash>` of the inputs that change the output."""
    key = "|".join((cfg.model_id, versions.NEURON_SDK_VERSION, compile_shape(cfg).key, image))
    return f"{SERVICE_ACCOUNT}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def compile_job(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """The Job: one Neuron device, same restricted pod security as the service."""
    shape = compile_shape(cfg)
    volumes, mounts = scratch_volumes(cfg)
    container = {
        "name": "compile",
        "image": image,
        "command": ["python", "-m", "app.model_store.neuron_compile", "compile"],
        "args": [
            f"--bucket={bucket}",
            f"--model-id={cfg.model_id}",
            f"--sdk-version={versions.NEURON_SDK_VERSION}",
            f"--batch-size={shape.batch_size}",
            f"--height={shape.height}",
            f"--width={shape.width}",
            f"--work-dir={CACHE_DIR}/compile",
        ],
        "env": base_env(cfg, region),
        "resources": {
            "requests": {"cpu": "3", "memory": "12Gi", NEURON.resource_name: 1},
            "limits": {"memory": "12Gi", NEURON.resource_name: 1},
        },
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(cfg, image),
            "namespace": cfg.namespace,
            "labels": {"app.kubernetes.io/name": SERVICE_ACCOUNT},
        },
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": cfg.compile_settings.timeout_s,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": SERVICE_ACCOUNT}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "securityContext": pod_security_context(cfg),
                    "containers": [container],
                    "volumes": volumes,
                    # One device only: the compiler needs one, and the scheduler extension is for >1 core.
                    "nodeSelector": scheduling(NEURON, cfg)["nodeSelector"],
                    "tolerations": scheduling(NEURON, cfg)["tolerations"],
                },
            },
        },
    }


def compile_service_account(cfg: ServingConfig) -> dict[str, Any]:
    """The Job's ServiceAccount (its role may read the weights and write the compiled prefix)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": cfg.namespace},
    }


def wait_init_container(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """Init container for the Neuron pods: wait until the compiled artifacts are complete."""
    return {
        "name": "wait-for-compiled-model",
        "image": image,
        "command": ["python", "-m", "app.model_store.neuron_compile", "wait"],
        "args": [
            f"--bucket={bucket}",
            f"--prefix={artifact_prefix(cfg)}",
            f"--timeout-s={cfg.compile_settings.timeout_s}",
            f"--poll-s={WAIT_POLL_S}",
        ],
        "env": base_env(cfg, region),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}],
    }
