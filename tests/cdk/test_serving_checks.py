"""cdk-nag (AwsSolutions) and cfn-lint on the synthesized serving template: zero findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cdk_nag
import pytest


@pytest.fixture(params=["default", "capacity"])
def synth(request, serving, capacity_serving):
    return {"default": serving, "capacity": capacity_serving}[request.param]


def test_cdk_nag_aws_solutions_is_clean(synth):
    report = cdk_nag.AwsSolutionsChecks().validate_scope(synth.stack)
    findings = [(v.rule_name, [r.construct_path for r in v.violating_resources]) for v in report.violations]
    assert findings == []
    assert report.success


def test_cfn_lint_is_clean(synth, tmp_path: Path):
    path = tmp_path / "serving.template.json"
    path.write_text(json.dumps(synth.template.to_json()))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), "--regions", "us-east-1", "--", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
