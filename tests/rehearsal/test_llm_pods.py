"""The LLM pods' own containers as the shipped synth applies them (llmEnabled), run the way their pod runs them
(tests/rehearsal/sandbox.py): the gateway image's files and a Python environment made of exactly its lock, the
manifest's command and variables, a read-only root, each emptyDir a tmpfs of its sizeLimit, the pod's user, and
no network but a moto server holding what the deploy leaves in the model store.

- `fetch-model`: with the weights (and on Neuron the compile's artifacts and marker) in the store, exits 0 and
  leaves the files where the vllm container's arguments and NEURON_COMPILED_ARTIFACTS point;
- `gateway`: serves /health, answers /readiness 503 because no engine runs here, and drains on SIGTERM.

The vllm container is not run: its images (CUDA, Neuron) do not exist here. Its arguments are parsed by the
local vLLM CPU build's own command-line parser where that environment exists (a different vLLM version than
the images', so only flags all three versions share are a fair check).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA, Accelerator
from cdk.llm import compile_job as lcj
from cdk.llm import workload
from cdk.llm.images import LLM_GATEWAY_IMAGE
from cdk.llm.names import ENGINE_SOCKET, deployment_name
from common.model_store.layout import COMPLETE_MARKER, weights_prefix
from tests.llm.stack import run_standin
from tests.llm.test_gateway_image import DOCKERFILE, image_files
from tests.rehearsal.conftest import Stacks
from tests.rehearsal.images import dockerfile_stage
from tests.rehearsal.pods import MOTO_ENDPOINT, Container
from tests.rehearsal.sandbox import Outcome, Spec, bwrap_unusable, run_sandbox

# A small fake model: what vLLM reads from a local folder, in miniature.
WEIGHTS = {
    "config.json": json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}),
    "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE"}}),
    "model.safetensors": "w" * 200_000,
}
ARTIFACTS = {"model.pt": "n" * 50_000, "neuron_config.json": json.dumps({"tp_degree": 2})}


@pytest.fixture(scope="module", autouse=True)
def sandbox_usable() -> None:
    unusable = bwrap_unusable()
    if unusable:
        pytest.skip(f"the pod rehearsal needs bubblewrap: {unusable}")


@dataclass(frozen=True)
class Store:
    """Where the compile Job's containers find the model store."""

    region: str
    bucket: str
    weights_prefix: str
    artifacts_prefix: str | None


@dataclass(frozen=True)
class LlmPod:
    """One LLM Deployment's containers in the synth, and where its model lives in the store."""

    containers: dict[str, Container]  # by container name
    region: str
    bucket: str
    weights_prefix: str
    artifacts_prefix: str | None


@pytest.fixture(scope="module")
def pods(stacks: Stacks) -> Callable[[Accelerator], LlmPod]:
    """The synth's LLM pod on an accelerator; the prefixes derived from the settings, not read from the pod."""
    llm = stacks.config.llm
    assert llm is not None, "the shipped synth of the tests turns llmEnabled on (tests/cdk/conftest.py)"

    def pod(acc: Accelerator) -> LlmPod:
        prefix = f"Deployment/{deployment_name(acc)}:"
        found = {label.removeprefix(prefix): c for label, c in stacks.containers.items() if label.startswith(prefix)}
        (bucket,) = [
            a.split("=", 1)[1] for a in found[workload.FETCH_CONTAINER].args or () if a.startswith("--bucket=")
        ]
        assert bucket in stacks.resources["buckets"], "the model store the deploy creates"
        return LlmPod(
            containers=found,
            region=stacks.values.region,
            bucket=bucket,
            weights_prefix=weights_prefix(llm.model_id),
            artifacts_prefix=lcj.artifact_prefix(llm) if acc is NEURON else None,
        )

    return pod


def argv(container: Container) -> list[str]:
    """Kubernetes' rule against the gateway image's ENTRYPOINT (no CMD): `command` replaces it, `args` follow."""
    stage = dockerfile_stage(DOCKERFILE, None)
    return [*(container.command if container.command is not None else stage.entrypoint or []), *(container.args or ())]


def environment(container: Container, python: Path) -> dict[str, str]:
    """The image's ENV and a PATH to the lock's Python, overlaid with exactly the manifest's variables and what
    the platform injects (the pod's name; moto and static keys in place of Pod Identity)."""
    return {
        **dockerfile_stage(DOCKERFILE, None).env,
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        **container.env,
        "HOSTNAME": "llm-rehearsal",
        "AWS_ENDPOINT_URL": MOTO_ENDPOINT,
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
    }


def rehearse(
    pod: LlmPod | Store,
    container: Container,
    python: Path,
    tmp_path: Path,
    plan: dict[str, Any],
    timeout_s: float,
    *,
    binds: tuple[tuple[str, str], ...] = (),
    network: bool = False,
) -> Outcome:
    """Run `container` of the gateway image in its sandbox; `binds` are read-only (host, pod) folders besides the
    image's files (a Secret volume's), `network` puts it on the host's network (a client of a server outside)."""
    assert container.read_only_root
    assert container.image.rsplit(":", 1)[1].startswith(f"{LLM_GATEWAY_IMAGE.kind}-"), container.image
    files = tmp_path / "srv"
    image_files(files)  # exactly what the image holds in its WORKDIR
    workdir = dockerfile_stage(DOCKERFILE, None).workdir
    spec = Spec(
        uid=container.run_as_user,
        gid=container.run_as_group,
        hostname="llm-rehearsal",
        volumes=container.volumes,
        binds=((str(files), workdir), *binds),
        workdir=workdir,
        network=network,
    )
    (tmp_path / "work" / "tmp").mkdir(parents=True, exist_ok=True)
    (tmp_path / "seed").mkdir()
    full_plan = {
        "region": pod.region,
        "buckets": [pod.bucket],
        "queues": {},
        "topics": [],
        "staged": [],
        "compiled": [],
        "kube": None,
        "argv": argv(container),
        "env": environment(container, python),
        "cwd": workdir,
        **plan,
    }
    return run_sandbox(spec, tmp_path / "work", tmp_path / "seed", full_plan, timeout_s=timeout_s)


def published(pod: LlmPod | Store, prefix: str, files: dict[str, str]) -> dict[str, Any]:
    """Files under `prefix` and its completion marker, as the staging and the compile Job leave them."""
    return {"bucket": pod.bucket, "prefix": prefix, "files": files, "marker": {"files": sorted(files)}}


def serve_args(engine: Container) -> list[str]:
    """What the vllm container passes to `vllm serve`: its args after `vllm serve` (Neuron: the image's ENTRYPOINT
    runs the args), or its args (NVIDIA: the image's ENTRYPOINT runs `vllm serve "$@"`)."""
    args = list(engine.args or ())
    starts = [i for i in range(len(args) - 1) if args[i : i + 2] == ["vllm", "serve"]]
    return args[starts[0] + 2 :] if starts else args


def engine_folders(pod: LlmPod, engine: Container) -> dict[str, str]:
    """S3 prefix -> the folder the vllm container reads it from (its model argument, NEURON_COMPILED_ARTIFACTS)."""
    folders = {pod.weights_prefix: serve_args(engine)[0]}
    if "NEURON_COMPILED_ARTIFACTS" in engine.env:
        assert pod.artifacts_prefix is not None
        folders[pod.artifacts_prefix] = engine.env["NEURON_COMPILED_ARTIFACTS"]
    return folders


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_fetch_model_leaves_the_model_where_vllm_reads_it(pods, acc, image_python, tmp_path):
    pod = pods(acc)
    fetch, engine = pod.containers[workload.FETCH_CONTAINER], pod.containers[workload.ENGINE_CONTAINER]
    assert fetch.init and not engine.init
    folders = engine_folders(pod, engine)
    compiled = [published(pod, pod.weights_prefix, WEIGHTS)]
    if pod.artifacts_prefix is not None:
        compiled.append(published(pod, pod.artifacts_prefix, ARTIFACTS))
    plan = {"mode": "exit", "compiled": compiled, "list_files": list(folders.values())}
    outcome = rehearse(pod, fetch, image_python, tmp_path, plan, 120)
    assert outcome.returncode == 0 and "killed" not in outcome.report, outcome
    for prefix, folder in folders.items():
        expected = WEIGHTS if prefix == pod.weights_prefix else ARTIFACTS
        left = outcome.report["files"][folder]
        assert {name: left.get(name) for name in expected} == {n: len(body) for n, body in expected.items()}, outcome
        assert not [name for name in left if name.endswith(".partial")], outcome
    # The engine mounts that same volume (read-only) at the same place.
    (model_mount,) = [v for v in fetch.volumes if v.name == workload.MODEL_VOLUME]
    assert [v for v in engine.volumes if v.name == workload.MODEL_VOLUME] == [model_mount]
    lines = [json.loads(line) for line in outcome.log.splitlines() if line.startswith("{")]
    assert lines and all(line["level"] != "error" for line in lines), outcome


def test_fetch_model_on_neuron_fails_in_one_line_without_the_compile(pods, image_python, tmp_path):
    # The compile never published (no marker): with a short wait, exit 3 naming the marker it waited for.
    pod = pods(NEURON)
    fetch = pod.containers[workload.FETCH_CONTAINER]
    args = [a for a in fetch.args or () if not a.startswith(("--timeout-s=", "--poll-s="))]
    short = Container(**{**fetch.__dict__, "args": (*args, "--timeout-s=2", "--poll-s=0.5")})
    plan = {"mode": "exit", "compiled": [published(pod, pod.weights_prefix, WEIGHTS)], "list_files": []}
    outcome = rehearse(pod, short, image_python, tmp_path, plan, 60)
    assert outcome.returncode == 3, outcome
    (error,) = [json.loads(line) for line in outcome.log.splitlines() if '"level": "error"' in line]
    assert error["message"] == f"s3://{pod.bucket}/{pod.artifacts_prefix}_COMPLETE.json did not appear within 2 s"


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_gateway_serves_its_probes_waits_for_the_engine_and_drains(pods, acc, image_python, tmp_path):
    pod = pods(acc)
    gateway = pod.containers[workload.GATEWAY_CONTAINER]
    assert gateway.readiness is not None
    plan = {
        "mode": "service",
        "readiness": gateway.readiness,  # the manifest's readinessProbe, its named port resolved
        "stop_marker": "the engine does not answer yet",  # the gateway's 503 while vLLM is not up
        "paths": ["/health", "/readiness"],
        "stop_timeout_s": float(gateway.env["SHUTDOWN_GRACE_S"]) + 10,
    }
    outcome = rehearse(pod, gateway, image_python, tmp_path, plan, 60)
    assert outcome.report["ready"] is False, outcome
    assert outcome.report["readiness"]["status"] == 503, outcome
    health, readiness = outcome.report["paths"]["/health"], outcome.report["paths"]["/readiness"]
    assert health[0] == 200 and readiness[0] == 503, outcome
    # SIGTERM drains and ends the server; uvicorn re-raises the signal it caught (tests/llm/test_gateway_image.py).
    assert outcome.returncode in (0, -signal.SIGTERM) and "killed" not in outcome.report, outcome
    assert '"message": "Finished server process' in outcome.log, outcome


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_the_gateway_reaches_the_engine_through_its_read_only_socket_mount(pods, acc, image_python, tmp_path):
    pod = pods(acc)
    gateway = pod.containers[workload.GATEWAY_CONTAINER]
    (spec,) = [c for c in gateway.pod_spec["containers"] if c["name"] == workload.GATEWAY_CONTAINER]
    (mount,) = [m for m in spec["volumeMounts"] if m["name"] == workload.ENGINE_SOCKET_VOLUME["name"]]
    assert mount["readOnly"] is True and gateway.env["UPSTREAM_URL"] == f"unix:{ENGINE_SOCKET}"
    with tempfile.TemporaryDirectory(prefix="engine-") as folder:
        # The engine's volume as the gateway's mount shows it: bound read-only at the mount's path, over the tmpfs the
        # sandbox makes of it. In the pod both containers run as one user; here the stand-in runs as the test's, so
        # the pod's user is let in to its folder and socket.
        os.chmod(folder, 0o755)  # noqa: S103 - a test folder, for the sandbox's user
        path = f"{folder}/{PurePosixPath(ENGINE_SOCKET).name}"
        with run_standin(uds=path):
            os.chmod(path, 0o777)  # noqa: S103 - connect needs write access to a socket
            plan = {
                "mode": "service",
                "readiness": gateway.readiness,
                "paths": ["/readiness", "/v1/models"],
                "stop_timeout_s": float(gateway.env["SHUTDOWN_GRACE_S"]) + 10,
            }
            binds = ((folder, mount["mountPath"]),)
            outcome = rehearse(pod, gateway, image_python, tmp_path, plan, 60, binds=binds)
    assert outcome.report["ready"] is True, outcome  # the manifest's readinessProbe: vLLM's /health, over the socket
    status, body, _ = outcome.report["paths"]["/v1/models"]
    assert status == 200 and json.loads(body)["data"][0]["id"] == "standin", outcome
    serving = next(json.loads(line) for line in outcome.log.splitlines() if '"message": "serving"' in line)
    assert serving["upstream"] == f"unix:{ENGINE_SOCKET}", outcome


def _vllm_cpu_python() -> Path | None:
    """The local vLLM CPU environment's Python if it is built for the current pins (building it takes long)."""
    from llm_local import vllm_env

    env = vllm_env.env_path()
    return vllm_env.env_python(env) if vllm_env.is_built(env) else None


# `vllm serve`'s own parser (the CLI's `serve` subcommand, as `vllm` builds it), reading the arguments without
# starting anything, then the checks `vllm serve` runs before it loads anything (validate_parsed_serve_args:
# --enable-auto-tool-choice needs --tool-call-parser) and the tool-parser registry the server checks the name
# against at start (vllm/entrypoints/openai/api_server.py in 0.13.0 and 0.27.1); it prints the values it read.
PARSE = """
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(["serve", *sys.argv[1:]])
validate_parsed_serve_args(args)
values = {k: getattr(args, k) for k in (
    "model_tag", "served_model_name", "uds", "tensor_parallel_size", "max_num_seqs", "max_model_len",
    "enable_prefix_caching", "num_gpu_blocks_override", "enable_auto_tool_choice", "tool_call_parser")}
values["tool_call_parser_registered"] = args.tool_call_parser in ToolParserManager.list_registered()
print(json.dumps(values))
"""


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_vllms_own_parser_reads_the_engine_arguments(stacks, pods, acc):
    python = _vllm_cpu_python()
    if python is None:
        pytest.skip("no local vLLM CPU environment (python -m llm_local.vllm_env build)")
    engine = pods(acc).containers[workload.ENGINE_CONTAINER]
    serve = serve_args(engine)
    assert (serve == list(engine.args or ())) is (acc is NVIDIA)
    run = subprocess.run([str(python), "-c", PARSE, *serve], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    parsed = json.loads(run.stdout.strip().splitlines()[-1])
    llm = stacks.config.llm
    assert llm is not None
    assert parsed["model_tag"] == workload.WEIGHTS_DIR
    assert parsed["served_model_name"] == [llm.served_model_name]
    assert parsed["uds"] == ENGINE_SOCKET  # vLLM listens there, and on no port
    assert parsed["tensor_parallel_size"] == llm.per_accelerator[acc.name].tensor_parallel
    assert (parsed["max_num_seqs"], parsed["max_model_len"]) == (llm.max_num_seqs, llm.max_model_len)
    if acc is NEURON:
        assert parsed["enable_prefix_caching"] is False and parsed["num_gpu_blocks_override"] == llm.max_num_seqs
    else:
        assert parsed["enable_prefix_caching"] is True
    assert parsed["enable_auto_tool_choice"] is True and parsed["tool_call_parser"] == llm.tool_call_parser
    assert parsed["tool_call_parser_registered"], f"vLLM has no tool parser {llm.tool_call_parser!r}"


# What vLLM does with --uds (vllm/entrypoints/openai/api_server.py create_server_unix_socket, 0.13.0 and 0.27.1):
# bind the path, with no removal before or after. Stands in for the image's program at the end of the start.
FAKE_ENGINE = """#!{python}
import socket, sys
path = sys.argv[sys.argv.index("--uds") + 1]
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).bind(path)
print("bound", " ".join(sys.argv[1:3]))
"""


def stale_socket(path: Path) -> None:
    """What a vLLM that ended leaves: the socket's file, bound by no one."""
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(path))
    leftover.close()


@pytest.fixture
def socket_path() -> Iterator[Path]:
    """A socket path in a short private folder (pytest's folders can make one longer than its 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="engine-") as folder:
        yield Path(folder) / "vllm.sock"


@pytest.mark.parametrize("acc", [NEURON, NVIDIA], ids=lambda a: a.name)
def test_a_restarted_engine_binds_its_socket_again(pods, acc, tmp_path, socket_path):
    # The socket's volume outlives a restart of the vllm container; its start removes what the last run left.
    engine = pods(acc).containers[workload.ENGINE_CONTAINER]
    program = "vllm" if acc is NEURON else versions.VLLM_NVIDIA_ENTRYPOINT
    fake = tmp_path / "engine"
    fake.write_text(FAKE_ENGINE.format(python=sys.executable), encoding="utf-8")
    fake.chmod(0o755)
    path = socket_path
    stale_socket(path)
    # The Neuron image's ENTRYPOINT runs the args as a command; the NVIDIA image's is replaced by `command`.
    argv = [*(engine.command or ()), *(engine.args or ())]
    argv = [str(path) if a == ENGINE_SOCKET else str(fake) if a == program else a for a in argv]
    assert argv[0] == "/bin/sh"
    started = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert started.returncode == 0, started.stderr
    assert started.stdout.split()[:2] == ["bound", "serve" if acc is NEURON else workload.WEIGHTS_DIR]
    # That run left its socket's file in turn, as vLLM does: without the removal, the next start would fail.
    without = subprocess.run([str(fake), "--uds", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert "Address already in use" in without.stderr  # what vLLM would meet without the removal


def test_the_engines_probe_passes_only_while_vllm_answers_on_its_socket(pods, socket_path):
    engine = pods(NVIDIA).containers[workload.ENGINE_CONTAINER]
    (spec,) = [c for c in engine.pod_spec["containers"] if c["name"] == workload.ENGINE_CONTAINER]
    probes = {spec[kind]["exec"]["command"][2] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
    assert len(probes) == 1
    path = socket_path
    probe = [sys.executable, "-c", probes.pop().replace(ENGINE_SOCKET, str(path))]
    with run_standin(uds=str(path)):
        assert subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0
    path.unlink(missing_ok=True)  # (Python 3.13's stand-in removes its socket on the way out; 3.11's does not)
    stale_socket(path)  # vLLM gone: the file stays, nothing answers
    failed = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    assert failed.returncode == 1 and "ConnectionRefusedError" in failed.stderr


COMPILE_JOB = "Job/llm-neuron-compile-"
COMPILE_CRONJOB = "CronJob/llm-neuron-compile:"


def compile_containers(stacks: Stacks, prefix: str = COMPILE_JOB) -> dict[str, Container]:
    """The synth's LLM compile Job (or its re-run CronJob), by container name."""
    return {label.split(":", 1)[1]: c for label, c in stacks.containers.items() if label.startswith(prefix)}


@pytest.fixture(scope="module")
def store(stacks: Stacks) -> Store:
    """The compile Job's model store: the bucket its steps name, the prefixes derived from the settings."""
    llm = stacks.config.llm
    assert llm is not None
    publish = compile_containers(stacks)["publish"]
    (bucket,) = [a.split("=", 1)[1] for a in publish.args or () if a.startswith("--bucket=")]
    return Store(stacks.values.region, bucket, weights_prefix(llm.model_id), lcj.artifact_prefix(llm))


def test_the_rerun_cronjob_runs_the_same_containers_as_the_compile_job(stacks):
    job, cronjob = compile_containers(stacks), compile_containers(stacks, COMPILE_CRONJOB)
    assert list(job) == list(cronjob) == ["fetch-weights", "compile", "publish"]
    for name, container in job.items():
        other = cronjob[name]
        assert (container.command, container.args, container.env, container.volumes) == (
            other.command,
            other.args,
            other.env,
            other.volumes,
        ), name


def test_the_compile_jobs_fetch_leaves_the_weights_where_the_compile_reads_them(
    stacks,
    store,
    image_python,
    tmp_path,
):
    job = compile_containers(stacks)
    fetch, compile_step = job["fetch-weights"], job["compile"]
    model_dir = (compile_step.args or ())[0]  # `vllm serve`'s model folder (cdk/llm/engine.py engine_args)
    plan = {"mode": "exit", "compiled": [published(store, store.weights_prefix, WEIGHTS)], "list_files": [model_dir]}
    outcome = rehearse(store, fetch, image_python, tmp_path, plan, 120)
    assert outcome.returncode == 0, outcome
    left = outcome.report["files"][model_dir]
    assert {name: left.get(name) for name in WEIGHTS} == {n: len(body) for n, body in WEIGHTS.items()}, outcome
    # The compile step reads it from the same volume.
    assert {v.name for v in fetch.volumes} & {v.name for v in compile_step.volumes}


@pytest.mark.parametrize("artifacts", [ARTIFACTS, {}], ids=["compiled", "empty"])
def test_the_compile_jobs_publish_uploads_the_artifacts_then_the_marker(
    stacks,
    store,
    image_python,
    tmp_path,
    artifacts,
):
    publish = compile_containers(stacks)["publish"]
    (src,) = [a.split("=", 1)[1] for a in publish.args or () if a.startswith("--src=")]
    fake = tmp_path / "work" / "artifacts"  # what the compile step left on the scratch volume
    fake.mkdir(parents=True)
    for name, body in artifacts.items():
        (fake / name).write_text(body)
    plan = {"mode": "exit", "copies": [{"from": "/rehearsal/artifacts", "to": src}]}
    outcome = rehearse(store, publish, image_python, tmp_path, plan, 90)
    keys = outcome.s3_keys(store.bucket)
    marker = f"{store.artifacts_prefix}{COMPLETE_MARKER}"
    if not artifacts:  # a compile that wrote nothing publishes no marker: the pods keep waiting, the Job fails
        assert outcome.returncode == 1 and "holds no files" in outcome.log, outcome
        assert keys == {}, outcome
        return
    assert outcome.returncode == 0, outcome
    assert {k: v for k, v in keys.items() if k != marker} == {
        f"{store.artifacts_prefix}{name}": len(body) for name, body in artifacts.items()
    }
    assert keys[marker] > 0


def test_a_compile_job_whose_artifacts_are_published_compiles_nothing(stacks, store, image_python, tmp_path):
    # A renamed Job (its gateway image changed, say) over artifacts already in the store: fetch-weights leaves the
    # flag instead of the weights, and the compile step stops at it without starting vLLM.
    job = compile_containers(stacks)
    fetch, compile_step = job["fetch-weights"], job["compile"]
    assert store.artifacts_prefix is not None
    done = [published(store, store.weights_prefix, WEIGHTS), published(store, store.artifacts_prefix, ARTIFACTS)]
    model_dir = (compile_step.args or ())[0]
    plan = {"mode": "exit", "compiled": done, "list_files": [lcj.SCRATCH_DIR]}
    outcome = rehearse(store, fetch, image_python, tmp_path / "fetch", plan, 120)
    assert outcome.returncode == 0, outcome
    left = outcome.report["files"][lcj.SCRATCH_DIR]
    flag = lcj.PUBLISHED_FLAG.removeprefix(f"{lcj.SCRATCH_DIR}/")
    assert flag in left and not [name for name in left if name.startswith(model_dir.removeprefix("/models/"))]

    def run_compile_step(with_flag: bool, work: Path) -> Outcome:
        """The compile step's own command (bash, its script, vLLM's flags) on its volumes; no vLLM is installed."""
        seed = work / "seed"
        seed.mkdir(parents=True)
        (work / "tmp").mkdir()
        copies = []
        if with_flag:
            (work / "flag").mkdir()
            (work / "flag" / flag).write_text(store.artifacts_prefix, encoding="utf-8")
            copies = [{"from": "/rehearsal/flag", "to": lcj.SCRATCH_DIR}]
        spec = Spec(compile_step.run_as_user, compile_step.run_as_group, "compile", compile_step.volumes, (), "/srv")
        step_plan = {
            "mode": "exit",
            "aws": False,
            "region": store.region,
            "kube": None,
            "copies": copies,
            "argv": [*(compile_step.command or ()), *(compile_step.args or ())],
            "env": {"PATH": "/usr/bin:/bin", **compile_step.env},
            "cwd": "/",
        }
        return run_sandbox(spec, work, seed, step_plan, timeout_s=60)

    skipped = run_compile_step(True, tmp_path / "skipped")
    assert skipped.returncode == 0 and "nothing to compile" in skipped.log, skipped
    started = run_compile_step(False, tmp_path / "started")  # without the flag it starts `vllm serve`
    assert started.returncode == 1 and "vllm serve exited before /health answered" in started.log, started
