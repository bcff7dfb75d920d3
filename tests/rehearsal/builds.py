"""The CodeBuild projects of the templates, run the way CodeBuild runs them, in a bubblewrap sandbox.

A build gets: its buildspec (inline, or the file named in the project from the repository), the project's
environment variables with their values made local (a SECRETS_MANAGER one gets a stand-in value, as
CodeBuild resolves it before the build starts), the variables CodeBuild sets itself (CODEBUILD_SRC_DIR,
CODEBUILD_BUILD_SUCCEEDING, AWS_REGION, ...), its source asset copied into a writable source folder, and
the build image's tools: Python of the buildspec's runtime version with the AWS CLI (a cached venv) and,
if this machine has one, a `docker` client (no daemon: the image builds stop at their first docker
command). The phases run in order, each in one bash, and a failed phase skips the others but post_build,
which sees CODEBUILD_BUILD_SUCCEEDING=0 (docs.aws.amazon.com/codebuild/latest/userguide/view-build-details.html
#view-build-details-phases). The root is read-only except the source folder and /tmp; the build runs as
root, as CodeBuild's standard images do. Stand-ins replace the internet: moto for AWS (AWS_ENDPOINT_URL),
a local wheel folder for PyPI (PIP_NO_INDEX, PIP_FIND_LINKS) and a local Hub (HF_ENDPOINT).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from tests.rehearsal.images import REHEARSAL_CACHE
from tests.rehearsal.pods import LocalValues, Volume
from tools.image_locks import REPO_ROOT

SOURCE_DIR: Final = "/codebuild/output/src1/src"
PHASES: Final = ("install", "pre_build", "build", "post_build")
# The build image's AWS CLI: awscli 1.46.3 (PyPI, the newest release when this was written), in a venv
# of the buildspec's Python; CodeBuild's standard image carries AWS CLI v2, whose commands used here
# (ecr describe-images, ecr get-login-password) take the same arguments.
AWSCLI: Final = "awscli==1.46.3"
GIB: Final = 1 << 30


@dataclass(frozen=True)
class Build:
    """One CodeBuild project as its build runs."""

    logical_id: str
    buildspec: Mapping[str, Any]
    env: Mapping[str, str]
    secrets: tuple[str, ...]  # names of SECRETS_MANAGER variables (CodeBuild resolves them)
    privileged: bool


def projects(template: dict[str, Any], values: LocalValues) -> dict[str, Build]:
    """Every AWS::CodeBuild::Project of a template, by logical id."""
    found = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource["Type"] != "AWS::CodeBuild::Project":
            continue
        props = resource["Properties"]
        spec = props["Source"]["BuildSpec"]
        inline = spec.lstrip().startswith("{")
        buildspec = json.loads(spec) if inline else yaml.safe_load((REPO_ROOT / spec).read_text())
        env, secrets = {}, []
        for variable in props["Environment"].get("EnvironmentVariables", []):
            if variable.get("Type", "PLAINTEXT") == "SECRETS_MANAGER":
                secrets.append(variable["Name"])
                env[variable["Name"]] = f"rehearsal-value-of-{variable['Name'].lower()}"
            else:
                env[variable["Name"]] = values.value(variable["Value"])
        found[logical_id] = Build(
            logical_id=logical_id,
            buildspec=buildspec,
            env=env,
            secrets=tuple(secrets),
            privileged=bool(props["Environment"].get("PrivilegedMode")),
        )
    return found


def _python(version: str) -> Path:
    """An interpreter of `version` (the buildspec's runtime): pythonX.Y on PATH or pyenv's."""
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [
        *sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True),
        shutil.which(f"python{version}"),
    ]
    for candidate in filter(None, candidates):
        if Path(candidate).is_file() and "shims" not in candidate:
            return Path(candidate)
    raise LookupError(f"no Python {version} for the build's runtime-versions (pyenv install {version})")


def build_tools(python_version: str) -> Path:
    """The build image's tools for one runtime: a cached venv of that Python with the AWS CLI."""
    key = hashlib.sha256(f"{python_version}|{AWSCLI}".encode()).hexdigest()[:12]
    target = REHEARSAL_CACHE / f"codebuild-{key}"
    script = target / "bin" / "aws"
    # Reused only where its script names this very folder: a cache reached by another path (a moved
    # checkout, a removed worktree that shared it) holds a script whose interpreter is gone.
    if script.is_file() and script.read_text().startswith(f"#!{target}/bin/python"):
        return target
    REHEARSAL_CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=REHEARSAL_CACHE))
    try:
        subprocess.run([str(_python(python_version)), "-m", "venv", str(staging)], check=True)
        pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, AWSCLI], check=True, capture_output=True, timeout=600)
        # The console script names the build path; rewrite it for the final one.
        script = staging / "bin" / "aws"
        script.write_text(script.read_text().replace(str(staging), str(target)))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def wheelhouse(requirements: Path, python_version: str) -> Path:
    """The wheels of a fully pinned requirements file for `python_version` on Linux x86-64, downloaded
    once from PyPI: the sandbox's stand-in for the index."""
    key = hashlib.sha256(requirements.read_bytes() + python_version.encode()).hexdigest()[:12]
    target = REHEARSAL_CACHE / f"wheels-{key}"
    if (target / ".complete").is_file():
        return target
    abi = "cp" + python_version.replace(".", "")
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]
    command = ["pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version", python_version]
    command += ["--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run([*command, "-r", str(requirements), "-d", str(target)], check=True, capture_output=True, timeout=600)
    (target / ".complete").write_text(key)
    return target


def runtime_python(build: Build) -> str:
    """The buildspec's install-phase Python runtime version (CodeBuild's runtime-versions)."""
    runtimes = build.buildspec.get("phases", {}).get("install", {}).get("runtime-versions", {})
    return str(runtimes.get("python", "3.12"))


def build_script(build: Build, control: str) -> str:
    """A bash script that runs the buildspec's phases as CodeBuild does, recording a failing command as
    "<phase> <index> <status>" in `<control>/failed`."""
    lines = ["export CODEBUILD_BUILD_SUCCEEDING=1", "failed=''"]
    for phase in PHASES:
        commands = build.buildspec.get("phases", {}).get(phase, {}).get("commands", [])
        if not commands:
            continue
        body = [f"trap 'status=$?; [ $status -eq 0 ] || echo \"{phase} $current $status\" >> {control}/failed' EXIT"]
        for index, command in enumerate(commands):
            body += [f"current={index}", command, "status=$?", "[ $status -eq 0 ] || exit $status"]
        script = "\n".join(body)
        guard = "" if phase == "post_build" else '[ -z "$failed" ] && '
        on_failure = f"{{ failed={phase}; CODEBUILD_BUILD_SUCCEEDING=0; }}"
        lines.append(f"{guard}{{ bash -c {shlex.quote(script)} || {on_failure}; }}")
    lines.append('[ -z "$failed" ]')
    return "\n".join(lines) + "\n"


def build_volumes() -> tuple[Volume, ...]:
    """The writable places of a CodeBuild container the rehearsal gives: the source folder and /tmp."""
    return (Volume("source", SOURCE_DIR, 8 * GIB, False), Volume("tmp", "/tmp", 8 * GIB, False))


# The source asset of each project (the constructs' own exclude lists, applied as CDK applies them).
def _asset_excludes(logical_id: str) -> list[str]:
    from cdk.constructs import image_builds
    from cdk.image.starting_gate import STARTING_GATE_IMAGE
    from cdk.llm.images import LLM_GATEWAY_IMAGE
    from cdk.serving import model_staging

    if logical_id.startswith(("WeightsStagingProject", "LlmWeightsStagingProject")):
        return model_staging.SOURCE_EXCLUDES
    for image in (image_builds.ROUTING_CONTROLLER_IMAGE, LLM_GATEWAY_IMAGE, STARTING_GATE_IMAGE):
        if logical_id.startswith(f"Images{image.construct_prefix}Build"):
            return image.excludes
    if logical_id.startswith("Images"):
        return image_builds.SOURCE_EXCLUDES
    raise LookupError(f"{logical_id}: which asset is its source? add it here")


def copy_source(logical_id: str, target: Path) -> list[str]:
    """Copy the project's source asset (the repository's files its excludes keep) to `target`."""
    import aws_cdk as cdk

    strategy = cdk.IgnoreStrategy.glob(str(REPO_ROOT), _asset_excludes(logical_id))
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    copied = []
    for relative in listed:
        source = REPO_ROOT / relative
        if source.is_file() and not strategy.ignores(str(source)):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)
            copied.append(relative)
    return copied
