"""The Makefile's developer loop as a newcomer meets it: `make test-fast` installs what its tests run, and
`make costs` prints the cost tables from a plain shell, with no banner before them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALLED = (".venv/.dev-installed", "node_modules/.installed")
"""The set-up's markers: the tests below never remake them (`make -o`), so that they install nothing."""


def make(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`make` in the checkout from a plain shell: the system PATH and a HOME, nothing from a venv."""
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_make_test_fast_installs_node_modules_on_a_fresh_clone(tmp_path):
    # Dry run with every target out of date (a fresh clone): what make would run, nothing run.
    result = make("--dry-run", "--always-make", "test-fast", home=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.splitlines()
    npm_ci = next(i for i, line in enumerate(commands) if line.startswith("npm ci"))
    pytest_fast = next(i for i, line in enumerate(commands) if "pytest --fast" in line)
    assert npm_ci < pytest_fast  # some fast tests run Node: the CRD validator, the pinned Node's checks


@pytest.mark.synth  # cdk.costs builds the app's config through aws_cdk, whose jsii runtime is a Node process
def test_make_costs_prints_the_trials_tables_with_no_node_banner(tmp_path):
    result = make(
        "-s", *(f"--old-file={marker}" for marker in INSTALLED), "costs", "COSTS_ARGS=profile=trial", home=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("| item | per hour |\n"), result.stdout[:500]
    assert "end-of-life" not in result.stdout + result.stderr
    assert "**total**" in result.stdout
