"""The Kubernetes Job that compiles the model for Neuron once, its re-run CronJob, and the init container
that waits for it: the compile-once pattern of cdk/serving/compile_job.py for the image model.

A Job's pod template is immutable, so the Job's name carries a hash of what it compiles and how
(model, SDK version, shape, image, node size): a change creates a new Job instead of failing the
update, and an unchanged deploy leaves the finished Job alone. The Job itself skips work when the
artifacts exist. The serving stack applies it only after the weights are staged.

The pod is pinned to `neuronCompileInstanceType` (an inf2.8xlarge by default; optimum-neuron: "We recommend using a
inf2.8xlarge or a larger instance for the model compilation", huggingface.co/docs/optimum-neuron/tutorials/
stable_diffusion) and must fit it beside the DaemonSets (cdk/serving/pod_fit.py checks it at synth),
and carries `karpenter.sh/do-not-disrupt: "true"` so consolidation does not take the node away
mid-compile; a finished (Succeeded/Failed) pod no longer blocks, so the node is then reclaimed
(aws/karpenter-provider-aws website/content/en/v1.14/concepts/disruption.md at 388ed61, "Pod-Level Controls").

The Job writes every large file to one scratch volume sized by `neuronCompileScratchGi` (checked against
`servingModelSizeGi` at synth): its work folder (weights, artifacts, the compiler's files), optimum-neuron's
export, which goes to a temporary folder (TMPDIR), and the Neuron compiler cache (NEURON_COMPILE_CACHE_URL,
unused while optimum-neuron's cache is disabled, but never on the read-only root). /tmp stays small.

A suspended CronJob with the same pod template (cdk/serving/job_templates.py) never runs by itself; it is
there so that a failed compile can be re-run with one command:
    kubectl -n <namespace> create job --from=cronjob/sd-neuron-compile sd-neuron-compile-rerun-$(date +%s)
"""

from __future__ import annotations

from typing import Any, Final

from cdk import versions
from cdk.config.serving import ServingConfig
from cdk.serving.compile_job import CompileJob, hashed_name, neuron_resources, rerun_command_for, service_account_for
from cdk.serving.pod_fit import FitSettings
from cdk.serving.pod_shape import (
    CACHE_DIR,
    TMP_DIR,
    base_env,
    container_security_context,
    pod_security_context,
    scratch_volumes,
)
from common.lora_keys import fused_variant
from common.model_store.layout import ImageSize, compiled_prefix

SERVICE_ACCOUNT: Final = "sd-neuron-compile"
# The scratch volume's mount point: base_env's caches (HF_HOME, XDG_CACHE_HOME) live there too.
SCRATCH_DIR: Final = CACHE_DIR
WORK_DIR: Final = f"{SCRATCH_DIR}/compile"
# The volume's root, which always exists: a TMPDIR that does not exist makes Python's tempfile fall back
# to /tmp without a word.
EXPORT_TMP_DIR: Final = SCRATCH_DIR
# The Neuron compiler cache's location (aws-neuron/aws-neuron-sdk general/arch/neuron-features/
# neuron-caching.rst: NEURON_COMPILE_CACHE_URL, default /var/tmp/neuron-compile-cache on the image's root).
COMPILE_CACHE_DIR: Final = f"{SCRATCH_DIR}/neuron-compile-cache"
RERUN_CRONJOB: Final = "sd-neuron-compile"
WAIT_POLL_S: Final = 15


def compile_sizes(cfg: ServingConfig) -> tuple[ImageSize, ...]:
    """The image sizes compiled and served (neuronCompileShapes; the first is the family's square native size)."""
    return tuple(ImageSize(width, height) for width, height in cfg.compile_settings.shapes)


def shape_args(cfg: ServingConfig) -> list[str]:
    """`--shape=<W>x<H>` for each size, for the compile and for the wait."""
    return [f"--shape={size.key}" for size in compile_sizes(cfg)]


def artifact_prefix(cfg: ServingConfig) -> str:
    """Where the compiled artifacts for this config live in the model store (one folder per size below)."""
    settings = cfg.compile_settings
    return compiled_prefix(
        cfg.model_id,
        versions.NEURON_SDK_VERSION,
        settings.batch_size,
        settings.tensor_parallel_size,
        fused_variant(settings.loras),
    )


def lora_args(cfg: ServingConfig) -> list[str]:
    """`--lora=<name>:<scale>` for each adapter the compile fuses (neuronCompileLoras)."""
    return [f"--lora={ref.key}" for ref in cfg.compile_settings.loras]


# The settings that size the compile pod, as a synth-time fit error names them.
COMPILE_FIT: Final = FitSettings(
    pod="the Neuron compile pod",
    instance_key="neuronCompileInstanceType",
    cpu_key="neuronCompileCpu",
    memory_key="neuronCompileMemoryGi",
    devices_key="neuronCompileTensorParallelSize",
)


def job_name(cfg: ServingConfig, image: str) -> str:
    """`sd-neuron-compile-<hash>` of every input of the (immutable) pod template."""
    settings = cfg.compile_settings
    key = "|".join(
        (
            cfg.model_id,
            versions.NEURON_SDK_VERSION,
            f"b{settings.batch_size}",
            # The compile's sizes and tensor parallel degree are arguments of the (immutable) pod template too.
            ",".join(size.key for size in compile_sizes(cfg)),
            f"tp{settings.tensor_parallel_size}",
            ",".join(ref.key for ref in settings.loras),
            image,
            settings.instance.name,
            f"{settings.cpu:g}",
            str(settings.memory_gi),
            str(settings.timeout_s),
            str(settings.scratch_gi),
            WORK_DIR,
            EXPORT_TMP_DIR,
            COMPILE_CACHE_DIR,
        )
    )
    return hashed_name(SERVICE_ACCOUNT, key)


def compile_env(cfg: ServingConfig, region: str) -> list[dict[str, str]]:
    """The pods' environment, with the export's temporary files and the compiler cache on the scratch volume."""
    return [
        *base_env(cfg, region),
        {"name": "TMPDIR", "value": EXPORT_TMP_DIR},
        {"name": "NEURON_COMPILE_CACHE_URL", "value": COMPILE_CACHE_DIR},
    ]


def compile_volumes(cfg: ServingConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pods' volumes, with the cache volume grown into the Job's scratch (neuronCompileScratchGi)."""
    volumes, mounts = scratch_volumes(cfg)
    (scratch,) = [m["name"] for m in mounts if m["mountPath"] == SCRATCH_DIR]
    sized = [
        {**v, "emptyDir": {**v["emptyDir"], "sizeLimit": f"{cfg.compile_settings.scratch_gi}Gi"}}
        if v["name"] == scratch
        else v
        for v in volumes
    ]
    return sized, mounts


def _compile_job(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> CompileJob:
    """The image model's compile: one Neuron device on a node fit to compile."""
    settings = cfg.compile_settings
    volumes, mounts = compile_volumes(cfg)
    container = {
        "name": "compile",
        "image": image,
        "command": ["python", "-m", "app.model_store.neuron_compile", "compile"],
        "args": [
            f"--bucket={bucket}",
            f"--model-id={cfg.model_id}",
            f"--sdk-version={versions.NEURON_SDK_VERSION}",
            f"--batch-size={settings.batch_size}",
            *shape_args(cfg),
            f"--tensor-parallel-size={settings.tensor_parallel_size}",
            f"--work-dir={WORK_DIR}",
            *lora_args(cfg),
        ],
        "env": compile_env(cfg, region),
        "resources": neuron_resources(cpu=settings.cpu, memory_gi=settings.memory_gi, devices=settings.devices),
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    # The devices of the tensor parallel degree (one for an unsharded model); above one device the Neuron scheduler
    # extension places them (the cluster turns it on from neuron_devices_per_pod).
    return CompileJob(
        name=SERVICE_ACCOUNT,
        namespace=cfg.namespace,
        timeout_s=settings.timeout_s,
        devices=settings.devices,
        pod_security=pod_security_context(cfg),
        containers=(container,),
        volumes=tuple(volumes),
        pinned=(settings.instance, COMPILE_FIT),
    )


def compile_job_spec(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """The Job spec shared by the Job and the re-run CronJob."""
    return _compile_job(cfg, image=image, bucket=bucket, region=region).spec()


def compile_job(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """The Job that compiles once after the weights are staged."""
    return _compile_job(cfg, image=image, bucket=bucket, region=region).job(job_name(cfg, image))


def rerun_cronjob(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """A suspended CronJob holding the same Job spec: `kubectl create job --from=cronjob/...` re-runs it."""
    return _compile_job(cfg, image=image, bucket=bucket, region=region).rerun_cronjob()


def rerun_command(cfg: ServingConfig) -> str:
    """The one command that re-runs a failed compile (documented in docs/serving.md and a stack output)."""
    return rerun_command_for(RERUN_CRONJOB, cfg.namespace)


def compile_service_account(cfg: ServingConfig) -> dict[str, Any]:
    """The Job's ServiceAccount (its role may read the weights and write the compiled prefix)."""
    return service_account_for(SERVICE_ACCOUNT, cfg.namespace)


def wait_init_container(cfg: ServingConfig, *, image: str, bucket: str, region: str) -> dict[str, Any]:
    """Init container for the Neuron pods: wait until the compiled artifacts are complete."""
    return {
        "name": "wait-for-compiled-model",
        "image": image,
        "command": ["python", "-m", "app.model_store.neuron_compile", "wait"],
        "args": [
            f"--bucket={bucket}",
            f"--prefix={artifact_prefix(cfg)}",
            *shape_args(cfg),
            f"--timeout-s={cfg.compile_settings.timeout_s}",
            f"--poll-s={WAIT_POLL_S}",
        ],
        "env": base_env(cfg, region),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}],
    }
