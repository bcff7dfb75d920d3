"""The LLM gateway's own image (it cannot be built here: no Docker engine). Its recipe is parsed for the
contract (its own packages and the shared runtime, whole; nothing of the image service), its lock is checked to
be the complete install set, and the files it copies are started from an environment made of exactly that lock,
in a read-only sandbox with no network."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from cdk import versions
from llm_gateway.settings import GatewaySettings
from tests.rehearsal.images import _instructions, dockerfile_stage
from tests.rehearsal.pods import Volume
from tests.rehearsal.sandbox import Spec, bwrap_unusable, run_sandbox
from tests.support.lock_site import lock_site
from tools import gateway_image_venv
from tools.image_locks import REPO_ROOT, lock_closure_problems, read_lock, read_requirements

pytestmark = pytest.mark.process  # runs a program of ours as a process per test (docs/testing.md)

DOCKERFILE = REPO_ROOT / "llm_gateway" / "Dockerfile"
LOCK = REPO_ROOT / "llm_gateway" / "requirements.lock"
REQUIREMENTS = REPO_ROOT / "llm_gateway" / "requirements.txt"
BUILDSPEC = REPO_ROOT / "buildspecs" / "llm-gateway.yml"
# What the image copies into its WORKDIR, each folder whole at its own name: the gateway, the LLM pods' model fetch
# (`python -m model_fetch`, cdk/llm/workload.py), the LLM benchmark's client (`python -m llm_bench`,
# cdk/llm/benchmark_job.py) and the shared runtime they stand on. Never the image service (app/).
IMAGE_PACKAGES = ("common", "llm_gateway", "model_fetch", "llm_bench")
GATEWAY_UID = 10001


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments) from its FROM on (continuation lines joined,
    comments dropped); what comes before the first FROM (the ARG) is left out."""
    found: list[list[tuple[str, str]]] = []
    for keyword, rest in _instructions(DOCKERFILE):
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, rest))
    return found


def instructions() -> list[tuple[str, str]]:
    """The image's own stage (the last)."""
    return stages()[-1]


def copies_into_workdir(stage: list[tuple[str, str]] | None = None) -> dict[str, str]:
    """Repository path -> path under WORKDIR, for each source of each COPY from the build context into the WORKDIR
    of `stage` (the image's own by default)."""
    found = {}
    for keyword, rest in instructions() if stage is None else stage:
        if keyword != "COPY":
            continue
        assert not rest.startswith("--"), f"COPY {rest}: flags are not expected here"
        *sources, destination = rest.split()
        if destination.startswith("/"):  # the lock, into /tmp for the install only
            continue
        assert destination.endswith("/"), f"COPY {rest}: copy into a folder, so each file keeps its name"
        for source in sources:
            if (REPO_ROOT / source).is_dir():  # Docker copies a folder's contents into the destination
                found[source.rstrip("/")] = destination.rstrip("/")
            else:
                found[source] = destination + Path(source).name
    return found


def test_copies_its_packages_and_the_shared_runtime_whole():
    assert copies_into_workdir() == {package: package for package in IMAGE_PACKAGES}


def test_build_context_holds_exactly_the_copied_packages_and_the_buildspec(tmp_path):
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    from cdk.llm.images import LLM_GATEWAY_BUILDSPEC, LLM_GATEWAY_EXCLUDES

    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(REPO_ROOT), str(copied), CopyOptions(exclude=LLM_GATEWAY_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
    )
    files = {p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()}
    assert {f for f in files if not f.startswith(tuple(f"{package}/" for package in IMAGE_PACKAGES))} == {
        LLM_GATEWAY_BUILDSPEC
    }
    shared = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "common").rglob("*.py")}
    assert {f for f in files if f.startswith("common/")} == shared
    assert {"llm_gateway/Dockerfile", "llm_gateway/requirements.lock", "llm_gateway/__main__.py"} <= files
    assert {"model_fetch/__main__.py", "llm_bench/__main__.py"} <= files
    assert not [f for f in files if "__pycache__" in f or f.endswith((".pyc", ".so"))]  # nothing built here
    assert BUILDSPEC == REPO_ROOT / LLM_GATEWAY_BUILDSPEC


def test_base_image_is_the_pinned_python_and_a_build_argument():
    assert _instructions(DOCKERFILE)[0] == ("ARG", "BASE_IMAGE")
    # One stage: the gateway is Python and its wheels, nothing is compiled in the build (no C, no compiler).
    assert [stage[0] for stage in stages()] == [("FROM", "${BASE_IMAGE}")]
    repository, tag = versions.LLM_GATEWAY_BASE_IMAGE.rsplit(":", 1)
    assert repository == "public.ecr.aws/docker/library/python"
    assert tag.startswith(f"{versions.LLM_GATEWAY_PYTHON}-slim")
    (build,) = [c for c in yaml.safe_load(BUILDSPEC.read_text())["phases"]["build"]["commands"] if "docker build" in c]
    assert '-f llm_gateway/Dockerfile --build-arg BASE_IMAGE="$BASE_IMAGE"' in build


def test_installs_exactly_the_lock_without_resolving():
    parsed = instructions()
    assert ("COPY", "llm_gateway/requirements.lock /tmp/requirements.lock") in parsed
    runs = [rest for keyword, rest in parsed if keyword == "RUN"]
    installs = [run for run in runs if "pip install" in run]
    assert installs == [
        "python -m pip install --no-deps --only-binary=:all: -r /tmp/requirements.lock && rm /tmp/requirements.lock"
    ]


def test_runs_the_gateway_as_a_numeric_non_root_user():
    parsed = instructions()
    users = [i for i, (keyword, _) in enumerate(parsed) if keyword == "USER"]
    assert users and parsed[users[-1]][1] == f"{GATEWAY_UID}:{GATEWAY_UID}"
    assert all(keyword != "RUN" for keyword, _ in parsed[users[-1] :])  # nothing runs as root after it
    assert f"useradd --uid {GATEWAY_UID} " in " ".join(rest for keyword, rest in parsed if keyword == "RUN")
    stage = dockerfile_stage(DOCKERFILE, None)
    assert stage.entrypoint == ["python", "-m", "llm_gateway"] and stage.cmd is None
    assert stage.workdir == "/srv"
    assert {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}.items() <= stage.env.items()
    assert ("EXPOSE", str(GatewaySettings.model_fields["port"].default)) in parsed


def test_lock_is_resolved_for_the_base_images_python():
    assert read_lock(LOCK).header["python-version"] == versions.LLM_GATEWAY_PYTHON


def test_lock_pins_the_inputs_and_is_closed():
    site = [str(lock_site(LOCK, versions.LLM_GATEWAY_PYTHON))]
    assert lock_closure_problems(LOCK, REQUIREMENTS, versions.LLM_GATEWAY_PYTHON, path=site) == []
    # The service's pins: the gateway runs the shared runtime with the image service and is tested in one
    # environment with it.
    service = {r.name.lower(): r.specifier for r in read_requirements(REPO_ROOT / "requirements.txt")}
    shared = [r for r in read_requirements(REQUIREMENTS) if r.name.lower() in service]
    assert {r.name.lower() for r in shared} >= {"uvicorn", "httpx", "pydantic-settings", "pyjwt"}
    assert [(r.name, r.specifier) for r in shared] == [(r.name, service[r.name.lower()]) for r in shared]


def test_uvicorn_runs_on_uvloop_and_httptools_without_the_extras_it_does_not_use():
    pins = read_lock(LOCK).pins
    assert {"uvloop", "httptools"} <= set(pins)  # the shared server's protocol is httptools' (common/http/protocol.py)
    unused = {"websockets", "watchfiles", "pyyaml"}
    assert not (unused | {"vllm", "torch", "diffusers", "fastapi", "gradio"}) & set(pins)


def _broken_lock(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    lock = tmp_path / "requirements.lock"
    lock.write_text(edit(LOCK.read_text()))
    return lock


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda text: re.sub(r"(?m)^h11==.*\n", "", text), r"no pin for h11>=0\.8 \(wanted by uvicorn==0\.54\.0\)"),
        (lambda text: re.sub(r"(?m)^cffi==.*\n", "", text), r"no pin for cffi.* \(wanted by cryptography=="),
        (lambda text: text.replace("uvicorn==0.54.0", "uvicorn==0.53.0"), r"does not satisfy uvicorn==0\.54\.0"),
        (lambda text: text.replace("anyio==", "anyio==3.0.0 #"), r"pins anyio==3\.0\.0, but the environment holds"),
        (lambda text: text + "pyyaml==6.0.4\n", r"pins pyyaml==6\.0\.4, which nothing in requirements\.txt needs"),
    ],
    ids=["dependency-missing", "extra-dependency-missing", "input-moved", "version-not-checkable", "stray-pin"],
)
def test_the_closure_check_is_not_blind(tmp_path, edit, expected):
    problems = lock_closure_problems(_broken_lock(tmp_path, edit), REQUIREMENTS, versions.LLM_GATEWAY_PYTHON)
    assert any(re.search(expected, problem) for problem in problems), problems


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def image_python() -> Path:
    """The interpreter of a venv made of exactly the lock, for the image's Python (tools/gateway_image_venv.py)."""
    try:
        return gateway_image_venv.image_python()
    except gateway_image_venv.VenvUnavailable as exc:
        _skip_or_fail(str(exc))
        raise


def test_the_lock_installs_a_consistent_environment(image_python):
    run = subprocess.run([str(image_python), "-m", "pip", "check"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    frozen = subprocess.run(
        [str(image_python), "-m", "pip", "freeze", "--all", "--exclude", "pip"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {line.split("==")[0].lower().replace("_", "-") for line in frozen.splitlines() if "==" in line}
    assert installed == set(read_lock(LOCK).pins)


def image_files(target: Path) -> None:
    """Copy what the image holds in its WORKDIR, and nothing else, to `target`: the build context's files."""
    _copy_into(target, copies_into_workdir())


def _copy_into(target: Path, copies: dict[str, str]) -> None:
    for source, destination in copies.items():
        path = REPO_ROOT / source
        if path.is_dir():
            shutil.copytree(path, target / destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
        else:
            (target / destination).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / destination)


def test_the_image_files_and_the_lock_start_the_gateway(image_python, tmp_path):
    unusable = bwrap_unusable()
    if unusable:
        _skip_or_fail(unusable)
    files = tmp_path / "srv"
    image_files(files)
    stage = dockerfile_stage(DOCKERFILE, None)
    port = 8000
    plan = {
        "region": "us-east-1",
        "buckets": [],
        "queues": {},
        "topics": [],
        "staged": [],
        "compiled": [],
        "kube": None,
        "argv": stage.entrypoint,
        "env": {
            **stage.env,
            "PATH": f"{image_python.parent}:/usr/local/bin:/usr/bin:/bin",
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "SHUTDOWN_GRACE_S": "5",
        },
        "cwd": stage.workdir,
        "mode": "service",
        "readiness": {"httpGet": {"port": port, "path": "/health"}},
        "paths": ["/health", "/readiness"],
        "stop_timeout_s": 20,
    }
    spec = Spec(
        uid=GATEWAY_UID,
        gid=GATEWAY_UID,
        hostname="llm-gateway",
        volumes=(Volume("tmp", "/tmp", 64 * 1024 * 1024, True),),
        binds=((str(files), stage.workdir),),
        workdir=stage.workdir,
    )
    (tmp_path / "work" / "tmp").mkdir(parents=True)
    (tmp_path / "seed").mkdir()  # the sandbox mounts a seed folder; the gateway reads nothing from it
    outcome = run_sandbox(spec, tmp_path / "work", tmp_path / "seed", plan, timeout_s=60)
    assert outcome.report.get("ready") is True, outcome
    (health_status, health_body, _), (readiness_status, readiness_body, _) = (
        outcome.report["paths"]["/health"],
        outcome.report["paths"]["/readiness"],
    )
    assert health_status == 200, outcome
    assert readiness_status == 503, outcome  # nothing answers at UPSTREAM_URL: no vLLM in the sandbox
    assert json.loads(health_body) and json.loads(readiness_body)  # JSON answers, not uvicorn's plain text
    # SIGTERM drains and ends the server cleanly; uvicorn then re-raises the signal it caught, so the process
    # ends by SIGTERM (as tests/llm/test_cancel_and_drain.py allows), never by the harness's kill.
    assert outcome.returncode in (0, -signal.SIGTERM) and "killed" not in outcome.report, outcome
    assert '"message": "Finished server process' in outcome.log, outcome
    first = json.loads(outcome.log.splitlines()[0])  # the shared JSON log format (common/logs.py)
    assert first["message"] == "serving" and first["url"] == f"http://127.0.0.1:{port}/"
