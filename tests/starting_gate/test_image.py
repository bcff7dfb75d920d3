"""The starting gate's image: its build context is its own folder and the shared runtime, and it installs exactly
its lock."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CopyOptions, FileSystem, IgnoreMode
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cdk.constructs.image_builds import REPO_ROOT
from cdk.image.starting_gate import STARTING_GATE_EXCLUDES

GATE = REPO_ROOT / "starting_gate"


def test_the_build_context_is_the_gate_and_the_shared_runtime_whole(tmp_path: Path) -> None:
    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(REPO_ROOT), str(copied), CopyOptions(exclude=STARTING_GATE_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
    )
    files = {str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()}
    shared = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "common").rglob("*.py")}
    assert {f for f in files if not f.startswith(("starting_gate/", "common/"))} == {"buildspecs/starting-gate.yml"}
    assert {f for f in files if f.startswith("common/")} == shared
    dockerfile = (GATE / "Dockerfile").read_text()
    assert "COPY common/ common/" in dockerfile and "COPY starting_gate/ starting_gate/" in dockerfile
    assert "app/" not in dockerfile  # nothing of the image service


def test_the_image_installs_exactly_the_lock() -> None:
    lock = (GATE / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lock if line and not line.startswith("#"))
    for line in (GATE / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            requirement = Requirement(line)
            assert pins[canonicalize_name(requirement.name)] in requirement.specifier
    dockerfile = (GATE / "Dockerfile").read_text()
    assert "--no-deps" in dockerfile and "requirements.lock" in dockerfile
