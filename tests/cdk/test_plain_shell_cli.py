"""The README's deploy block from a plain shell: no activated .venv, the system's python3 and node.

`cdk bootstrap`, `cdk deploy` and `cdk destroy` all start by running cdk.json's app command, so
`cdk ls` with the same environment shows whether they can start. PATH holds only the system's
directories, as in a fresh terminal after the README's set-up (`make synth` built .venv and
node_modules); the synth is offline (the example environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STACKS = {"SdOnEksNetwork", "SdOnEksCluster", "SdOnEksImages", "SdOnEksServing"}


def plain_shell_env(home: Path) -> dict[str, str]:
    """What a new terminal has: the system PATH, a HOME, nothing from the Makefile or a venv."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


def test_cdk_json_runs_the_app_with_the_projects_environments():
    app = json.loads((REPO_ROOT / "cdk.json").read_text())["app"]
    assert not app.startswith("python"), "a bare python3 is the system's, which has no aws_cdk"
    assert os.access(REPO_ROOT / app, os.X_OK)


@pytest.mark.synth  # `cdk ls` synthesizes the whole app, through no fixture
@pytest.mark.skipif(shutil.which("npx", path="/usr/local/bin:/usr/bin:/bin") is None, reason="no system npm/npx")
def test_the_cdk_cli_lists_the_stacks_from_a_plain_shell(tmp_path):
    result = subprocess.run(
        ["npx", "--no-install", "cdk", "ls", "-c", "exampleEnvironment=true", "-o", str(tmp_path / "cdk.out")],
        cwd=REPO_ROOT,
        env=plain_shell_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(result.stdout.split()) == STACKS


def test_without_the_set_up_the_app_says_which_command_to_run(tmp_path):
    # A copy of the launcher in a checkout that has neither .venv nor node_modules.
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO_ROOT / "tools" / "cdk-app", tmp_path / "tools" / "cdk-app")
    result = subprocess.run(
        [str(tmp_path / "tools" / "cdk-app")], env=plain_shell_env(tmp_path), capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "run `make synth` once" in result.stderr and "Traceback" not in result.stderr
