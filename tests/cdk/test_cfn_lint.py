"""cfn-lint on every synthesized template: no errors; ignored warnings are listed in .cfnlintrc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cdk.conftest import REPO_ROOT


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth", "trial_synth"])
def test_cfn_lint_is_clean(fixture, request):
    synth = request.getfixturevalue(fixture)
    templates = sorted(str(p) for p in synth.outdir.glob("*.template.json"))
    assert templates
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("cfn-lint")),
            "--config-file",
            str(REPO_ROOT / ".cfnlintrc"),
            "--",
            *templates,
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
