"""What each image brings to a container: its Dockerfile's environment, command and files, and a local
Python environment that stands in for the image's (the base images are not available here).

- `nvidia`: the service's own `.venv` (CPU torch: the rehearsal stops where the CUDA backend looks for a GPU);
- `neuron`: the Neuron contract venv (the Neuron image's Python and lock, tests/contract/neuron_venv.py) with
  the Neuron SDK stand-in loaded at every interpreter start, as the DLC has the SDK installed;
- `routing-controller`: `.venv` too, which holds routing_controller/requirements.txt;
- `starting-gate`: `.venv` too, which holds starting_gate/requirements.txt (the trial profile's gate).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tests.contract.neuron_venv import ensure_venv, venv_python
from tools.image_locks import REPO_ROOT

DOCKERFILES: Final = {
    "neuron": (REPO_ROOT / "app" / "Dockerfile", "neuron"),
    "nvidia": (REPO_ROOT / "app" / "Dockerfile", "nvidia"),
    "routing-controller": (REPO_ROOT / "routing_controller" / "Dockerfile", None),
    "starting-gate": (REPO_ROOT / "starting_gate" / "Dockerfile", None),
}
# What the images copy from the repository (their Dockerfiles' COPY lines into WORKDIR /srv).
IMAGE_FILES: Final = {
    "neuron": {"app": "app", "common": "common"},
    "nvidia": {"app": "app", "common": "common"},
    "routing-controller": {"common": "common", "routing_controller": "routing_controller"},
    "starting-gate": {"common": "common", "starting_gate": "starting_gate"},
}
REHEARSAL_CACHE: Final = REPO_ROOT / ".cache" / "rehearsal"


@dataclass
class Stage:
    """What one Dockerfile stage sets: environment, WORKDIR, ENTRYPOINT and CMD (None: inherited)."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) with continuation lines joined and comments dropped."""
    lines: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        lines.append((keyword.upper(), rest.strip()))
        pending = ""
    return lines


def dockerfile_stage(dockerfile: Path, target: str | None) -> Stage:
    """The ENV, WORKDIR, ENTRYPOINT and CMD a build of `target` (None: the last stage) ends with; a stage
    FROM an earlier one inherits them, and a new ENTRYPOINT clears CMD (Docker's rule)."""
    stages: dict[str, Stage] = {}
    current = Stage()
    name = ""
    for keyword, rest in _instructions(dockerfile):
        if keyword == "FROM":
            words = rest.split()
            base = stages.get(words[0])
            current = (
                Stage(dict(base.env), base.workdir, base.entrypoint, base.cmd) if base else Stage()  # a base image
            )
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            stages[name] = current
        elif keyword == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                current.env[key] = value
        elif keyword == "WORKDIR":
            current.workdir = rest
        elif keyword == "ENTRYPOINT":
            current.entrypoint, current.cmd = json.loads(rest), None
        elif keyword == "CMD":
            current.cmd = json.loads(rest)
    return stages[target] if target is not None else current


def image_stage(kind: str) -> Stage:
    """The Dockerfile stage an image kind is built from."""
    dockerfile, target = DOCKERFILES[kind]
    return dockerfile_stage(dockerfile, target)


def _standin_env() -> Path:
    """A venv of the Neuron image's interpreter that sees the contract venv's packages and loads the SDK
    stand-in at start (a .pth line). Its folder names the contract venv and the stand-in's content, so a
    new lock or stand-in builds a new one; it is built aside and moved into place."""
    contract = ensure_venv()
    standin = (REPO_ROOT / "tests" / "contract" / "neuron_sdk_standin.py").read_bytes()
    target = REHEARSAL_CACHE / f"neuron-image-{contract.name}-{hashlib.sha256(standin).hexdigest()[:12]}"
    if venv_python(target).is_file():
        return target
    REHEARSAL_CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=REHEARSAL_CACHE))
    try:
        interpreter = venv_python(contract).resolve()
        subprocess.run([str(interpreter), "-m", "venv", "--without-pip", str(staging)], check=True)
        (site,) = (staging / "lib").glob("python*/site-packages")
        (contract_site,) = (contract / "lib").glob("python*/site-packages")
        (staging / "standin").mkdir()
        (staging / "standin" / "neuron_sdk_standin.py").write_bytes(standin)
        # addsitedir also runs the contract venv's own .pth files; the stand-in is installed before any import.
        (site / "zz-neuron-image.pth").write_text(
            f"import site; site.addsitedir({str(contract_site)!r})\n"
            f"{target / 'standin'}\n"
            "import neuron_sdk_standin; neuron_sdk_standin.install_at_startup()\n",
            encoding="utf-8",
        )
        os.replace(staging, target)  # its scripts name the build path: only `bin/python` is ever run
    except OSError:
        if not venv_python(target).is_file():  # not another session's build that won the race
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def python_env(kind: str) -> Path:
    """The folder whose bin/ holds the image's `python` for the rehearsal."""
    if kind == "neuron":
        return _standin_env()
    return Path(sys.prefix)
