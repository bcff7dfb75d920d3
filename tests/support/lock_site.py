"""The distributions a lock pins, installed as its image installs them (`pip install --no-deps`, wheels for the
image's CPython on Linux x86_64) into a folder of their own: where `tools.image_locks.lock_closure_problems` reads
their declared dependencies (its `path`). The test environment's own versions float with PyPI's releases (a new
charset-normalizer there made the check report the lock's pin as unchecked); this folder holds exactly the lock.

Built once per lock and Python under .cache/lock-sites/, from PyPI alone (this machine's pip configuration names
local mirrors the image builds do not have).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / ".cache" / "lock-sites"
RECIPE = "2"  # bump when the install below changes
PYPI = "https://pypi.org/simple"
# The platform tags of the images' Linux x86_64 wheels, named one by one (pip does not widen a given tag).
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64",
             "linux_x86_64")  # fmt: skip


def lock_site(lock: Path, python_version: str) -> Path:
    """The folder holding exactly `lock`'s distributions for CPython `python_version` (built on first use)."""
    digest = hashlib.sha256(f"{RECIPE}\0{python_version}\0".encode() + lock.read_bytes()).hexdigest()[:16]
    target = CACHE / f"{lock.parent.name}-{digest}"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=CACHE))
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", "--index-url", PYPI,
        "--target", str(staging), "--implementation", "cp", "--python-version", python_version,
        *(flag for platform in PLATFORMS for flag in ("--platform", platform)), "-r", str(lock),
    ]  # fmt: skip
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
        if run.returncode != 0:
            reason = f"the wheels of {lock.relative_to(REPO_ROOT)} could not be fetched:\n{run.stderr[-3000:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        os.replace(staging, target)  # built aside: an interrupted build never looks complete
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
