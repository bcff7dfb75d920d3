"""The LLM's Neuron compile Job: compiled once, under a key of everything that changes the artifacts, with the
flags a serving pod runs, every write on a volume that holds it. (The image model's compile objects are held
to their old form by test_neuron_compile_job_refactor.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath

import pytest

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm import compile_job as lcj
from cdk.llm import workload
from cdk.llm.engine import engine_args
from cdk.llm.names import ENGINE_PORT, ENGINE_SOCKET
from tests.cdk.conftest import DEFAULT_CONTEXT
from tests.support.k8s_schema import validate_all

ON = DEFAULT_CONTEXT | {"llmEnabled": True}
FAMILIES = {"neuron": ["inf2"], "nvidia": ["g5", "g6"]}
ARGS = {
    "gateway_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:llm-gateway-abc",
    "bucket": "model-store",
    "weights_prefix": "models/qwen--qwen2.5-1.5b-instruct/",
    "region": "us-east-1",
}
SERVING = ServingConfig.from_context(DEFAULT_CONTEXT)
# Paths a container writes to, by environment variable (HOME: the shell's and Python's dot-files).
WRITTEN_ENV = (
    "HOME",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "NEURON_COMPILED_ARTIFACTS",
    "BASE_COMPILE_WORK_DIR",
    "NEURON_COMPILE_CACHE_URL",
)


def llm_config(**changes) -> LlmConfig:
    cfg = LlmConfig.from_context(ON | changes, instance_families=FAMILIES)
    assert cfg is not None
    return cfg


def pod_of(job):
    return job.job()["spec"]["template"]["spec"]


def step(job, name):
    pod = pod_of(job)
    (container,) = [c for c in (*pod.get("initContainers", []), *pod["containers"]) if c["name"] == name]
    return container


def arg(container, name):
    (value,) = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"--{name}=")]
    return value


def flag(args, name):
    return args[args.index(name) + 1]


def test_the_prefix_is_readable_and_under_the_models_slug():
    prefix = lcj.artifact_prefix(llm_config())
    assert prefix.startswith("compiled-llm/qwen--qwen2.5-1.5b-instruct/sdk2.28.0-tp2-len4096-seqs8-")
    digest = prefix.rstrip("/").rsplit("-", 1)[1]
    assert len(digest) == 10 and int(digest, 16) >= 0
    assert prefix.endswith("/") and len(prefix) < 100


@pytest.mark.parametrize(
    "changes",
    [
        # A model outside the catalog with the preset's shape: the preset named, its Hub id overridden.
        {"llmModel": "qwen2.5-1.5b-instruct", "llmModelId": "Qwen/Qwen2.5-0.5B-Instruct"},
        {"llmModelRevision": "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"},
        {"llmTensorParallelNeuron": 4, "llmInstanceTypeNeuron": "inf2.24xlarge"},
        {"llmMaxModelLen": 8192},
        {"llmMaxNumSeqs": 4},
    ],
)
def test_the_prefix_changes_with_each_setting_the_artifacts_depend_on(changes):
    assert lcj.artifact_prefix(llm_config(**changes)) != lcj.artifact_prefix(llm_config())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VLLM_NEURON_SDK_VERSION", "2.31.1"),
        ("VLLM_NEURON_IMAGE", "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1"),
    ],
)
def test_the_prefix_changes_with_the_sdk_and_the_image(monkeypatch, name, value):
    before = lcj.artifact_prefix(llm_config())
    monkeypatch.setattr(versions, name, value)
    assert lcj.artifact_prefix(llm_config()) != before


def test_the_prefix_changes_with_the_kv_cache_layout(monkeypatch):
    before = lcj.artifact_prefix(llm_config())
    monkeypatch.setattr("cdk.llm.engine.NEURON_BLOCK_SIZE", 16)
    assert lcj.artifact_prefix(llm_config()) != before


@pytest.mark.parametrize(
    "changes",
    [
        {"llmServedModelName": "another-name"},
        {"llmTensorParallelNvidia": 2, "llmInstanceTypeNvidia": "g6.12xlarge"},
        {"llmMinReplicasNeuron": 2},
        {"llmCpuNeuron": 4},
        {"llmMemoryGiNeuron": 14},
        {"llmModelSizeGi": 8},
        {"llmNeuronCompileTimeoutSeconds": 7200},
        {"llmGatewayMaxConcurrentRequests": 32},
        {"llmStartupTimeoutSecondsNeuron": 1800},
    ],
)
def test_the_prefix_stays_when_nothing_the_artifacts_depend_on_changes(changes):
    assert lcj.artifact_prefix(llm_config(**changes)) == lcj.artifact_prefix(llm_config())


def test_the_compile_step_runs_the_engine_with_a_serving_pods_flags():
    llm = llm_config()
    job = lcj.compile_job(llm, SERVING, **ARGS)
    compile_step = step(job, "compile")
    served = engine_args(NEURON, llm, lcj.WEIGHTS_DIR, port=ENGINE_PORT)
    assert compile_step["args"] == served
    assert compile_step["image"] == versions.VLLM_NEURON_IMAGE
    assert compile_step["command"][:2] == ["bash", "-c"] and 'vllm serve "$@"' in compile_step["command"][2]
    # The flags vllm-neuron compiles from are the ones the prefix is keyed on.
    key = lcj.artifact_key(llm)
    assert flag(served, "--tensor-parallel-size") == key["tensor_parallel"]
    assert flag(served, "--max-model-len") == key["max_model_len"]
    assert flag(served, "--max-num-seqs") == key["max_num_seqs"]
    assert flag(served, "--block-size") == key["block_size"]
    assert flag(served, "--num-gpu-blocks-override") == key["num_blocks"] == key["max_num_seqs"]
    assert "--no-enable-prefix-caching" in served and key["prefix_caching"] == "false"
    env = {e["name"]: e["value"] for e in compile_step["env"]}
    assert env["NEURON_COMPILED_ARTIFACTS"] == lcj.ARTIFACTS_DIR == arg(step(job, "publish"), "src")
    assert served[0] == lcj.WEIGHTS_DIR == arg(step(job, "fetch-weights"), "dest")


def test_the_compile_runs_exactly_what_a_serving_pod_runs_weights_path_included():
    # The artifacts record the weights path of the compile; a serving pod loads its weights from that path.
    llm = llm_config()
    compile_step = step(lcj.compile_job(llm, SERVING, **ARGS), "compile")
    pod = workload.manifests(
        NEURON,
        llm,
        SERVING,
        gateway_image=ARGS["gateway_image"],
        vllm_image=versions.VLLM_NEURON_IMAGE,
        bucket=ARGS["bucket"],
        weights_prefix=ARGS["weights_prefix"],
        artifacts_prefix=lcj.artifact_prefix(llm),
        region=ARGS["region"],
        env_config_maps=(),
    )[-1]["spec"]["template"]["spec"]
    (engine,) = [c for c in pod["containers"] if c["name"] == workload.ENGINE_CONTAINER]
    served = engine["args"][engine["args"].index("vllm") :]
    # Only where the server listens differs (the pod's socket, the Job's loopback port): vllm-neuron compiles from
    # the model and the engine's flags, never from the server's address.
    assert served == ["vllm", "serve", *listening_elsewhere(compile_step["args"], "--uds", ENGINE_SOCKET)]
    assert lcj.artifact_key(llm)["weights_dir"] == compile_step["args"][0]


def listening_elsewhere(flags: list[str], *address: str) -> list[str]:
    """`flags` with their --host and --port replaced by `address`, where --host stood."""
    at = flags.index("--host")
    assert flags[at : at + 4] == ["--host", "127.0.0.1", "--port", str(ENGINE_PORT)]
    return [*flags[:at], *address, *flags[at + 4 :]]


def test_the_block_flags_are_neuron_only():
    nvidia = engine_args(NVIDIA, llm_config(), "/models/llm", port=ENGINE_PORT)
    assert "--block-size" not in nvidia and "--num-gpu-blocks-override" not in nvidia
    assert flag(nvidia, "--tensor-parallel-size") == "1" and flag(nvidia, "--host") == "127.0.0.1"


def test_the_steps_fetch_then_compile_then_publish_to_the_prefix():
    llm = llm_config()
    job = lcj.compile_job(llm, SERVING, **ARGS)
    pod = pod_of(job)
    assert [c["name"] for c in pod["initContainers"]] == ["fetch-weights", "compile"]
    assert [c["name"] for c in pod["containers"]] == ["publish"]
    fetch, publish = step(job, "fetch-weights"), step(job, "publish")
    assert fetch["command"] == ["python", "-m", "model_fetch"]
    assert (arg(fetch, "bucket"), arg(fetch, "prefix")) == (ARGS["bucket"], ARGS["weights_prefix"])
    assert publish["command"] == ["python", "-m", "model_fetch.publish"]
    assert (arg(publish, "bucket"), arg(publish, "prefix")) == (ARGS["bucket"], lcj.artifact_prefix(llm))
    meta = dict(m.split("=", 1) for m in (a.split("=", 1)[1] for a in publish["args"] if a.startswith("--meta=")))
    assert meta == lcj.artifact_key(llm)
    assert fetch["image"] == publish["image"] == ARGS["gateway_image"]


def test_every_write_lands_on_a_volume_that_holds_it():
    llm = llm_config()
    job = lcj.compile_job(llm, SERVING, **ARGS)
    pod = pod_of(job)
    volumes = {v["name"]: v["emptyDir"] for v in pod["volumes"]}
    for container in (*pod["initContainers"], *pod["containers"]):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        env = {e["name"]: e["value"] for e in container["env"]}
        written = [env[name] for name in WRITTEN_ENV if name in env]
        written += [a.split("=", 1)[1] for a in container["args"] if a.startswith(("--dest=", "--src="))]
        assert {"HOME", "TMPDIR"} <= set(env), container["name"]
        for path in written:
            holders = [m for m in mounts if PurePosixPath(path).is_relative_to(m)]
            assert holders, f"{container['name']} writes {path} on the read-only root"
    # The weights, the artifacts and the compiler's files share the scratch volume, sized from the model.
    scratch = volumes["scratch"]["sizeLimit"]
    assert scratch == f"{lcj.SCRATCH_MODEL_COPIES * llm.model_size_gi + lcj.SCRATCH_FIXED_GI}Gi"
    assert lcj.SCRATCH_MODEL_COPIES >= 3
    for path in (lcj.WEIGHTS_DIR, lcj.ARTIFACTS_DIR, lcj.COMPILER_WORK_DIR, lcj.COMPILE_CACHE_DIR):
        assert PurePosixPath(path).is_relative_to(lcj.SCRATCH_DIR), path
    bigger = lcj.compile_job(llm_config(llmModelSizeGi=30), SERVING, **ARGS)
    assert {v["name"]: v for v in pod_of(bigger)["volumes"]}["scratch"]["emptyDir"]["sizeLimit"] == "100Gi"


def test_the_compile_asks_for_the_degrees_chips_on_a_node_fit_to_compile():
    node = SERVING.compile_settings
    for tp, devices in ((2, 1), (4, 2)):
        llm = llm_config(llmTensorParallelNeuron=tp, llmInstanceTypeNeuron="inf2.24xlarge")
        job = lcj.compile_job(llm, SERVING, **ARGS)
        resources = step(job, "compile")["resources"]
        assert resources["requests"][NEURON.resource_name] == resources["limits"][NEURON.resource_name] == devices
        assert resources["requests"]["cpu"] == f"{node.cpu:g}"
        assert resources["requests"]["memory"] == f"{node.memory_gi}Gi"
        pod = pod_of(job)
        assert pod["nodeSelector"] == NEURON.node_label and pod["tolerations"] == [NEURON.toleration]
        # More than one chip needs the Neuron scheduler extension (contiguous devices).
        assert pod.get("schedulerName") == (versions.NEURON_SCHEDULER_NAME if devices > 1 else None)
        for name in ("fetch-weights", "publish"):
            assert NEURON.resource_name not in step(job, name)["resources"]["requests"]


def test_the_pod_runs_once_non_root_within_its_deadline_and_is_not_disrupted():
    llm = llm_config()
    job = lcj.compile_job(llm, SERVING, **ARGS).job()
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] == llm.neuron_compile_timeout_s
    assert spec["ttlSecondsAfterFinished"] > 0 and spec["backoffLimit"] >= 1
    template = spec["template"]
    assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    pod = template["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == lcj.COMPILE_NAME and pod["automountServiceAccountToken"] is False


def test_the_job_name_hashes_the_whole_pod_template():
    llm = llm_config()
    job = lcj.compile_job(llm, SERVING, **ARGS)
    name = job.job()["metadata"]["name"]
    expected = hashlib.sha256(json.dumps(job.spec(), sort_keys=True).encode()).hexdigest()[:10]
    assert name == f"{lcj.COMPILE_NAME}-{expected}"
    assert lcj.compile_job(llm, SERVING, **ARGS).job()["metadata"]["name"] == name  # stable
    changed = [
        lcj.compile_job(llm, SERVING, **(ARGS | {"gateway_image": ARGS["gateway_image"] + "2"})),
        lcj.compile_job(llm, SERVING, **(ARGS | {"weights_prefix": "models/other/"})),
        lcj.compile_job(llm_config(llmNeuronCompileTimeoutSeconds=7200), SERVING, **ARGS),
        lcj.compile_job(llm_config(llmModelSizeGi=8), SERVING, **ARGS),
        lcj.compile_job(llm_config(llmServedModelName="another-name"), SERVING, **ARGS),
        lcj.compile_job(llm, ServingConfig.from_context(DEFAULT_CONTEXT | {"neuronCompileCpu": 20}), **ARGS),
    ]
    names = {c.job()["metadata"]["name"] for c in changed}
    assert name not in names and len(names) == len(changed)


def test_a_failed_compile_is_rerun_from_a_suspended_cronjob_with_the_same_spec():
    job = lcj.compile_job(llm_config(), SERVING, **ARGS)
    manifest, cron = job.job(), job.rerun_cronjob()
    assert cron["metadata"]["name"] == lcj.COMPILE_NAME and cron["spec"]["suspend"] is True
    assert cron["spec"]["jobTemplate"]["spec"] == manifest["spec"]
    assert job.rerun_command() == (
        f"kubectl -n {SERVING.namespace} create job --from=cronjob/{lcj.COMPILE_NAME} "
        f"{lcj.COMPILE_NAME}-rerun-$(date +%s)"
    )
    assert validate_all([job.service_account(), manifest, cron], versions.KUBERNETES_VERSION) == []
