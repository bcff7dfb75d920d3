"""The pod rehearsal: every container the serving stack runs, run the way its pod runs it (see sandbox.py),
against a local moto server holding what the deploy leaves in AWS, to the state the cluster expects.

- the Neuron compile Job (its re-run CronJob has the same container): with the weights staged, every step up
  to optimum-neuron's first compile, then the SDK stand-in's stop; each large write on a volume that holds it;
- the Neuron pods' init container: with the compile published, exits 0;
- the GPU service: with the weights staged, serves its probes, readiness 503 only because this machine has no
  GPU, and drains on SIGTERM;
- the routing controller: against an API server holding the stacks' Ingress and Deployments (GPU pods ready,
  Neuron pods still waiting for the compile, as on a first deploy), its readiness probe passes, and it
  touches nothing but the weighted action, with the token the kubelet mounts.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest

from cdk import versions
from cdk.config.serving import COMPILE_SCRATCH_MODEL_COPIES
from cdk.image import neuron_compile_job as njob
from common.model_store.layout import shape_prefix, split_s3_uri
from common.probe_paths import HEALTH_PATH, READINESS_PATH
from tests.rehearsal.conftest import Stacks, seeded_weights
from tests.rehearsal.pods import UNRESOLVED, Container, Volume

COMPILE_JOB = "Job/sd-neuron-compile-"
RERUN_CRONJOB = f"CronJob/{njob.RERUN_CRONJOB}:compile"
WAIT_INIT = "Deployment/sd-neuron:wait-for-compiled-model"
GPU_SERVICE = "Deployment/sd-gpu:sd"
ROUTING_CONTROLLER = "Deployment/sd-routing-controller:controller"
# With llmEnabled, the OpenAI routes' instance of the same controller.
LLM_ROUTING_CONTROLLER = "Deployment/llm-routing-controller:controller"
# The LLM pods' and compile Job's containers our image runs: tests/rehearsal/test_llm_pods.py.
LLM_REHEARSED = (
    "Deployment/llm-neuron:fetch-model",
    "Deployment/llm-neuron:gateway",
    "Deployment/llm-gpu:fetch-model",
    "Deployment/llm-gpu:gateway",
    "Job/llm-neuron-compile-",
    "CronJob/llm-neuron-compile:",
    "CronJob/llm-neuron-bench:",  # tests/rehearsal/test_llm_benchmark_job.py
    "CronJob/llm-gpu-bench:",
)
# Not rehearsable here, each with the reason.
NOT_REHEARSED = {
    "Deployment/sd-neuron:sd": "loads NEFF files only a real compile writes; tests/contract checks its calls",
    "Deployment/llm-neuron:vllm": "AWS's vLLM Neuron image needs an Inferentia2 chip; its arguments are parsed by "
    "vLLM's own parser (tests/rehearsal/test_llm_pods.py)",
    "Deployment/llm-gpu:vllm": "AWS's vLLM CUDA image needs a GPU; its arguments are parsed by vLLM's own parser",
}
# The stand-in's stop at the first compile (tests/contract/neuron_sdk_standin.py trace()).
FIRST_COMPILE = re.compile(
    r"NeuronSdkUnavailable: torch_neuronx\.trace \(the first compile: (?P<module>\w+), (?P<bytes>\d+) bytes; "
    r"work dir (?P<work>\S+), temporary files (?P<tmp>\S+), cache (?P<cache>\S+)\)"
)
GIB = 1 << 30


def _compile_job(stacks: Stacks) -> Container:
    (label,) = [label for label in stacks.containers if label.startswith(COMPILE_JOB)]
    return stacks.containers[label]


def _arg(container: Container, name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in container.args or () if a.startswith(f"--{name}=")]
    return value


def _volume_of(container: Container, path: str) -> Volume | None:
    """The writable volume `path` lies on (the deepest mount that holds it), None for the read-only root."""
    holders = [v for v in container.volumes if PurePosixPath(path).is_relative_to(v.mount_path)]
    return max(holders, key=lambda v: len(v.mount_path), default=None)


def test_every_container_of_the_stacks_is_rehearsed(stacks):
    rehearsed = {
        COMPILE_JOB,
        RERUN_CRONJOB,
        WAIT_INIT,
        GPU_SERVICE,
        ROUTING_CONTROLLER,
        LLM_ROUTING_CONTROLLER,
        *LLM_REHEARSED,
        *NOT_REHEARSED,
    }
    unknown = [label for label in stacks.containers if not any(label.startswith(r) for r in rehearsed)]
    assert not unknown, f"containers without a rehearsal: {unknown}"
    for container in stacks.containers.values():
        used = [*(container.command or ()), *(container.args or ()), *container.env.values()]
        assert not [u for u in used if UNRESOLVED in u], f"{container.label}: a value the rehearsal cannot make local"


def test_the_rerun_cronjob_runs_the_same_container_as_the_compile_job(stacks):
    job, cronjob = _compile_job(stacks), stacks.containers[RERUN_CRONJOB]
    assert (job.command, job.args, job.env, job.volumes, job.run_as_user) == (
        cronjob.command,
        cronjob.args,
        cronjob.env,
        cronjob.volumes,
        cronjob.run_as_user,
    )


@pytest.fixture(scope="module")
def compile_rehearsal(stacks, seed_dir, tmp_path_factory):
    """The compile Job, run once: weights staged by the deploy, nothing compiled yet."""
    from tests.rehearsal.sandbox import rehearse

    job = _compile_job(stacks)
    bucket = _arg(job, "bucket")
    staged = {"bucket": bucket, "model_id": stacks.config.serving.model_id, "from_dir": seeded_weights(seed_dir)}
    outcome = rehearse(
        job,
        tmp_path_factory.mktemp("compile-job"),
        seed_dir,
        region=stacks.values.region,
        resources=stacks.resources,
        staged=[staged],
        timeout_s=240,
    )
    return job, bucket, outcome


def test_the_compile_job_runs_every_step_up_to_the_first_compile(stacks, compile_rehearsal):
    """The weights come from the model store, optimum-neuron exports without reaching the Hub, and the
    run stops where the Neuron SDK's compiler would start; nothing is published without a compile."""
    _, bucket, outcome = compile_rehearsal
    stop = FIRST_COMPILE.search(outcome.log)
    assert stop, f"the compile Job did not reach optimum-neuron's first compile:\n{outcome}"
    assert outcome.returncode == 1, outcome
    cfg = stacks.config.serving
    (size,) = njob.compile_sizes(cfg)
    batch, tp = cfg.compile_settings.batch_size, cfg.compile_settings.tensor_parallel_size
    compiling = f"compiling {cfg.model_id} (sd) for {size.key}, batch {batch}, tensor parallel {tp}"
    assert f"{compiling}, with Neuron SDK {versions.NEURON_SDK_VERSION}" in outcome.log
    published = [key for key in outcome.s3_keys(bucket) if key.startswith(njob.artifact_prefix(cfg))]
    assert not published, published


def test_the_compile_jobs_large_files_go_to_volumes_that_hold_them(stacks, compile_rehearsal):
    """Each place the compile writes a full copy of the model (read at the stop, from the real process) is a
    writable volume large enough for the configured model (servingModelSizeGi) at full size."""
    job, _, outcome = compile_rehearsal
    stop = FIRST_COMPILE.search(outcome.log)
    assert stop, f"the compile Job did not reach optimum-neuron's first compile:\n{outcome}"
    work_dir = _arg(job, "work-dir")
    model_bytes = stacks.config.serving.model_size_gi * GIB
    # (what, where, full copies of the model): the compiler's work files count twice (the traced graph
    # with its weights as constants, and the NEFF built from it).
    places = [
        ("the downloaded weights", f"{work_dir}/weights", 1),
        ("the published artifacts", f"{work_dir}/compiled", 1),
        ("optimum-neuron's export (TMPDIR)", stop["tmp"], 1),
        ("the compiler's work files", stop["work"], 2),
        ("the Neuron compiler cache", stop["cache"], 0),
    ]
    assert sum(copies for *_, copies in places) == COMPILE_SCRATCH_MODEL_COPIES
    problems, needs = [], {}
    for what, path, copies in places:
        volume = _volume_of(job, path)
        if volume is None:
            problems.append(f"{what} ({path}) is on the read-only root")
            continue
        needs.setdefault(volume, []).append((what, path, copies))
    for volume, items in needs.items():
        needed = sum(copies for *_, copies in items) * model_bytes
        if needed > volume.size_bytes:
            listed = ", ".join(f"{what} ({path})" for what, path, _ in items)
            problems.append(
                f"volume '{volume.name}' ({volume.mount_path}, {volume.size_bytes / GIB:g} GiB) is too small for "
                f"{listed}: {needed / GIB:g} GiB for a {model_bytes / GIB:g} GiB model (servingModelSizeGi)"
            )
    assert not problems, "\n".join(problems)


def test_the_neuron_pods_wait_ends_once_the_compile_is_published(stacks, run):
    container = stacks.containers[WAIT_INIT]
    bucket = _arg(container, "bucket")
    prefix = _arg(container, "prefix")
    assert prefix == njob.artifact_prefix(stacks.config.serving)
    (size,) = njob.compile_sizes(stacks.config.serving)
    assert _arg(container, "shape") == size.key
    compiled = {
        "bucket": bucket,
        "prefix": shape_prefix(prefix, size),
        "files": {"model_index.json": "{}"},
        "marker": {"files": []},
    }
    outcome = run(WAIT_INIT, compiled=[compiled], timeout_s=60)
    assert outcome.returncode == 0, outcome


def test_the_gpu_service_starts_and_stops_only_for_want_of_a_gpu(stacks, run, seed_dir):
    """Up to the accelerator, the GPU pod runs as deployed: it serves its probes (liveness answers,
    readiness stays 503 because this machine has no GPU, which is the only failure), and drains on SIGTERM."""
    container = stacks.containers[GPU_SERVICE]
    bucket, _ = split_s3_uri(container.env["MODEL_ID"])
    cfg = stacks.config.serving
    staged = {"bucket": bucket, "model_id": cfg.model_id, "from_dir": seeded_weights(seed_dir)}
    assert container.readiness["httpGet"]["path"] == READINESS_PATH
    service = {"stop_marker": "load failed", "stop_timeout_s": cfg.shutdown_grace_s + 10, "paths": [HEALTH_PATH]}
    outcome = run(GPU_SERVICE, staged=[staged], service=service, timeout_s=180)
    assert (outcome.report.get("readiness") or {}).get("status") == 503, outcome
    assert "BACKEND=cuda but torch sees no CUDA device" in outcome.log, outcome
    assert outcome.report["paths"][HEALTH_PATH][0] == 200, outcome
    assert outcome.returncode in (0, -15), outcome


def _api_objects(stacks: Stacks) -> tuple[list[dict], list[dict]]:
    """(objects, lists) of the API server on a first deploy: the stacks' Ingress and Deployments as applied
    (replicas defaulted to 1, as the API server does), the GPU pods ready, the Neuron pods not yet (their
    init container waits for the compile), no NodeClaim launching."""
    objects, pods = [], []
    for manifest in stacks.manifests:
        meta = manifest["metadata"]
        if manifest["kind"] == "Ingress":
            path = f"/apis/networking.k8s.io/v1/namespaces/{meta['namespace']}/ingresses/{meta['name']}"
        elif manifest["kind"] == "Deployment":
            path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
            manifest = {**manifest, "spec": {"replicas": 1, **manifest["spec"]}}
            ready = meta["name"] not in ("sd-neuron", "llm-neuron")  # both wait for a compile
            labels = manifest["spec"]["template"]["metadata"]["labels"]
            pods.append(
                {
                    "metadata": {"name": f"{meta['name']}-0", "namespace": meta["namespace"], "labels": labels},
                    "status": {
                        "phase": "Running" if ready else "Pending",
                        "conditions": [{"type": "Ready", "status": str(ready)}],
                    },
                }
            )
        else:
            continue
        objects.append({"path": path, "object": manifest})
    namespace = stacks.config.serving.namespace
    lists = [
        {"path": f"/api/v1/namespaces/{namespace}/pods", "items": pods},
        {"path": "/apis/karpenter.sh/v1/nodeclaims", "items": []},
    ]
    return objects, lists


@pytest.mark.parametrize("label", [ROUTING_CONTROLLER, LLM_ROUTING_CONTROLLER], ids=["image", "llm"])
def test_the_routing_controller_becomes_ready_and_only_moves_the_weights(stacks, run, label):
    container = stacks.containers[label]
    assert "exec" in container.readiness
    objects, lists = _api_objects(stacks)
    service = {"stop_timeout_s": 30}
    outcome = run(label, service=service, kube_objects=objects, kube_lists=lists, timeout_s=120)
    assert outcome.report.get("ready"), outcome
    requests = outcome.report["api_requests"]
    # The kubernetes client sends the mounted token (its scheme in lower case).
    assert requests and all(r["authorization"].lower() == "bearer rehearsal-service-account-token" for r in requests)
    assert [r for r in requests if r["method"] == "PATCH"], "a first deploy moves the weight to the ready pool"
    action = f"alb.ingress.kubernetes.io/actions.{container.env['ROUTING_ACTION']}"
    for patch in [r for r in requests if r["method"] == "PATCH"]:
        assert patch["path"].endswith(f"/ingresses/{container.env['ROUTING_INGRESS']}"), patch
        assert set(patch["body"]) == {"metadata"} and set(patch["body"]["metadata"]) == {"annotations"}, patch
        assert set(patch["body"]["metadata"]["annotations"]) == {action}, patch
    assert '"event": "StepFailed"' not in outcome.log, outcome
