"""A virtual environment made of exactly the LLM gateway image's lock, on the image's Python: where the gateway
runs here as it runs on its pod.

The image installs `llm_gateway/requirements.lock` on Python `LLM_GATEWAY_PYTHON` (cdk/versions.py); the tests'
.venv holds other versions of both (its own Python, the image service's pins). Code that starts the gateway to
check what the image does (tests/llm/test_gateway_image.py, the pod rehearsals) or to measure it
(`python -m tools.gateway_overhead`) takes this interpreter. The venv is built once from PyPI (about a minute) and
kept under .cache/, keyed by the lock's hash, so a changed lock makes a new one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from cdk import versions  # constants only: no CDK library needed

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPO_ROOT / "llm_gateway" / "requirements.lock"
VENV_CACHE = REPO_ROOT / ".cache" / "llm-gateway-image-venv"
VENV_RECIPE = "1"  # bump when the venv's build steps change
PYPI = "https://pypi.org/simple"
BUILD_TIMEOUT_S = 900


class VenvUnavailable(Exception):
    """The venv cannot be made on this machine (no Python of the image's version, or no PyPI): one line why."""


def image_interpreter() -> Path | None:
    """A Python of the image's version: pythonX.Y on PATH, or pyenv's."""
    version = versions.LLM_GATEWAY_PYTHON
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which(f"python{version}"),
        *sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}")),
    ]
    return next((Path(c) for c in reversed(candidates) if c and Path(c).is_file()), None)


def venv_path() -> Path:
    """Where the venv of the current lock lives (whether or not it is built yet)."""
    digest = hashlib.sha256(f"{VENV_RECIPE}\0{versions.LLM_GATEWAY_PYTHON}\0".encode() + LOCK.read_bytes())
    return VENV_CACHE / digest.hexdigest()[:16]


def image_python() -> Path:
    """The venv's interpreter, built first if need be; VenvUnavailable where it cannot be built here."""
    target = venv_path()
    python = target / "bin" / "python"
    if python.is_file():
        return python
    interpreter = image_interpreter()
    if interpreter is None:
        version = versions.LLM_GATEWAY_PYTHON
        raise VenvUnavailable(f"no Python {version} here (pyenv install {version})")
    unreachable = pypi_unreachable()
    if unreachable:
        raise VenvUnavailable(unreachable)
    build_venv(interpreter, target)
    return python


def pypi_unreachable() -> str | None:
    """Why PyPI cannot be reached, or None."""
    try:
        with urllib.request.urlopen(f"{PYPI}/pip/", timeout=15) as response:  # noqa: S310  # a constant https URL
            response.read(1)
    except OSError as exc:
        return f"PyPI cannot be reached ({exc}); the gateway image's venv is built from it"
    return None


def build_venv(interpreter: Path, target: Path) -> None:
    """`target`: a venv of `interpreter` with exactly the lock, installed as the Dockerfile installs it, from
    PyPI alone (this machine's pip configuration names local mirrors the image build does not have). Built aside
    and moved into place, so an interrupted build never looks complete; a build that finds `target` made meanwhile
    (another test process) keeps that one. The venvs of older locks beside `target` are removed. RuntimeError with
    pip's output if a step fails."""
    cache = target.parent
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "--quiet", "--index-url", PYPI]
        for command in (
            [str(interpreter), "-m", "venv", str(staging)],
            [*pip, "--no-deps", "--only-binary=:all:", "-r", str(LOCK)],
        ):
            run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
            if run.returncode != 0:
                raise RuntimeError(f"{' '.join(command)}:\n{(run.stdout + run.stderr)[-4000:]}")
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / "bin" / "python").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for stale in cache.iterdir():  # venvs of older locks
        if stale.name != target.name and not stale.name.startswith(".build-"):
            shutil.rmtree(stale, ignore_errors=True)
