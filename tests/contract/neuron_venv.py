"""The Neuron contract venv: the Neuron image's Python version with its lock's packages, built once.

It lives under `.cache/neuron-contract-venv/<key>/` (git-ignored; or $NEURON_CONTRACT_CACHE), where the
key hashes everything that goes into it (the lock, the interpreter version, the torch pin, this recipe),
so a changed lock builds a fresh one and an unchanged one is reused. torch-neuronx is not on PyPI: the
venv takes the laptop's CPU torch (requirements-local.txt's pin; pip's configured indexes serve the CPU
build here), and the Neuron SDK is replaced by a stand-in inside the checks (neuron_sdk_standin.py).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name

from cdk import versions
from tools.image_locks import REPO_ROOT, image_lock_specs, read_requirements

# NEURON_CONTRACT_CACHE: a folder that outlives the checkout (CI's fresh clones), else the git-ignored .cache/.
CACHE_ROOT = Path(os.environ.get("NEURON_CONTRACT_CACHE") or REPO_ROOT / ".cache" / "neuron-contract-venv")
RECIPE = "1"  # bump when the build steps below change
BUILD_TIMEOUT_S = 1800


class NoInterpreter(LookupError):
    """No Python of the Neuron image's version on this machine."""


def python_version() -> str:
    """The Neuron image's Python version (cdk/versions.py)."""
    return versions.BASE_IMAGE_PYTHON["neuron"]


def find_interpreter() -> Path:
    """A Python of the Neuron image's version: $NEURON_CONTRACT_PYTHON, pythonX.Y on PATH, or pyenv's."""
    version = python_version()
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [
        os.environ.get("NEURON_CONTRACT_PYTHON"),
        shutil.which(f"python{version}"),
        *sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True),
    ]
    for candidate in filter(None, candidates):
        path = Path(candidate)
        if path.is_file():
            return path
    raise NoInterpreter(
        f"no Python {version} (the Neuron image's, cdk/versions.py BASE_IMAGE_PYTHON): install it "
        f"(e.g. `pyenv install {version}`) or set NEURON_CONTRACT_PYTHON"
    )


def torch_requirement() -> str:
    """The CPU torch pin of requirements-local.txt, standing in for the DLC's torch-neuronx build."""
    (torch,) = [
        r for r in read_requirements(REPO_ROOT / "requirements-local.txt") if canonicalize_name(r.name) == "torch"
    ]
    return str(torch)


def venv_key() -> str:
    """A hash of everything the venv is built from."""
    lock = image_lock_specs()["neuron"].lock_file
    digest = hashlib.sha256()
    for part in (RECIPE, python_version(), torch_requirement(), lock.read_text(encoding="utf-8")):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def venv_python(venv: Path) -> Path:
    """The venv's interpreter."""
    return venv / "bin" / "python"


def _run(command: list[str]) -> None:
    """Run a build step quietly; on failure raise with the end of its output."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{(result.stdout + result.stderr)[-4000:]}")


def ensure_venv() -> Path:
    """The venv for the current lock: reused when built before, else built aside and moved into place."""
    target = CACHE_ROOT / venv_key()
    if (target / ".complete").is_file():
        return target
    interpreter = find_interpreter()
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=CACHE_ROOT))
    try:
        _run([str(interpreter), "-m", "venv", str(staging)])
        pip = [str(venv_python(staging)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
        _run([*pip, torch_requirement()])
        _run([*pip, "-r", str(image_lock_specs()["neuron"].lock_file)])
        (staging / ".complete").write_text(venv_key() + "\n", encoding="utf-8")
        # Built aside, then moved into place: an interrupted build never looks complete. Its console
        # scripts then name the build path, so the venv is only ever run as `<venv>/bin/python -m ...`.
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for stale in CACHE_ROOT.iterdir():  # venvs of older locks
        if stale.name != target.name and not stale.name.startswith(".build-"):
            shutil.rmtree(stale, ignore_errors=True)
    return target
