"""The starting gate's image: its build context holds what its Dockerfile copies and the modules the gate imports,
and it installs exactly its lock."""

from __future__ import annotations

import ast
from pathlib import Path

from aws_cdk import CopyOptions, FileSystem, IgnoreMode

from cdk.constructs.image_builds import REPO_ROOT, STARTING_GATE_EXCLUDES

GATE = REPO_ROOT / "starting_gate"


def test_the_build_context_is_the_gate_and_what_it_imports(tmp_path: Path) -> None:
    copied = tmp_path / "source"
    FileSystem.copy_directory(
        str(REPO_ROOT), str(copied), CopyOptions(exclude=STARTING_GATE_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
    )
    files = {str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()}
    outside = {f for f in files if not f.startswith("starting_gate/")}
    assert outside == {"app/__init__.py", "app/metric_names.py", "app/probe_paths.py", "buildspecs/starting-gate.yml"}
    imported = set()  # app's modules the gate imports: `from app import x` and `from app.x import y`
    for path in GATE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "app":
                imported |= {f"app/{alias.name}.py" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app."):
                imported.add(node.module.replace(".", "/") + ".py")
    assert imported and imported <= outside
    dockerfile = (GATE / "Dockerfile").read_text()
    assert "COPY app/__init__.py app/metric_names.py app/probe_paths.py app/" in dockerfile


def test_the_image_installs_exactly_the_lock() -> None:
    lock = (GATE / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lock if line and not line.startswith("#"))
    for line in (GATE / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert pins[name] == version
    dockerfile = (GATE / "Dockerfile").read_text()
    assert "--no-deps" in dockerfile and "requirements.lock" in dockerfile
