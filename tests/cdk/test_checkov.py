"""Checkov on what the synth produces: the CloudFormation templates and the Kubernetes objects inside them.

A finding fails the suite unless it is fixed or suppressed next to its resource with a reason
(cdk/checkov.py). Checkov runs from its own virtual environment, which `make test` builds in
.cache/checkov-venv from tests/support/checkov-requirements.txt; under CI a missing one is an error, elsewhere
the test skips and says how to get it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.conftest import REPO_ROOT
from tests.cdk.manifests import manifests

CHECKOV = REPO_ROOT / ".cache" / "checkov-venv" / "bin" / "checkov"


@pytest.fixture(scope="module")
def checkov() -> Path:
    if not CHECKOV.exists():
        message = f"no Checkov at {CHECKOV}: `make test` builds it from tests/support/checkov-requirements.txt"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHECKOV


def run_checkov(executable: Path, directory: Path, framework: str) -> dict[str, Any]:
    """Checkov's JSON report for one framework over one directory (offline: --skip-download)."""
    result = subprocess.run(
        [
            str(executable),
            "-d",
            str(directory),
            "--framework",
            framework,
            "-o",
            "json",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    # Exit 1 means failed checks; anything else but 0 is Checkov itself failing.
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    return report[0] if isinstance(report, list) else report


def failures(report: dict[str, Any]) -> list[str]:
    return [
        f"{f['check_id']} {f['file_path']} {f['resource']}: {f['check_name']}"
        for f in report["results"]["failed_checks"]
    ]


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth", "trial_synth"])
def test_checkov_finds_nothing_unsuppressed(fixture, request, checkov, tmp_path):
    synth = request.getfixturevalue(fixture)
    templates = tmp_path / "cloudformation"
    objects = tmp_path / "kubernetes"
    templates.mkdir()
    objects.mkdir()
    for name, template in synth.raw_templates.items():
        (templates / f"{name}.template.json").write_text(json.dumps(template))
        for index, obj in enumerate(manifests(template)):
            (objects / f"{name}-{index:02d}-{obj['kind']}.json").write_text(json.dumps(obj))

    cfn = run_checkov(checkov, templates, "cloudformation")
    k8s = run_checkov(checkov, objects, "kubernetes")

    assert cfn["summary"]["resource_count"] > 50 and k8s["summary"]["resource_count"] > 5, "nothing was scanned"
    assert failures(cfn) + failures(k8s) == []
    for report in (cfn, k8s):
        for skipped in report["results"]["skipped_checks"]:
            comment = skipped["check_result"].get("suppress_comment", "")
            assert len(comment) > 40, f"{skipped['check_id']} on {skipped['resource']} needs a reason: {comment!r}"


def _references(template: dict[str, Any]) -> str:
    """Everything that can name a custom-resource handler: ServiceTokens, provider environments, state machines."""
    found: list[Any] = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        found.append(props.get("ServiceToken"))
        if resource["Type"] == "AWS::Lambda::Function":
            found.append(props.get("Environment"))
        if resource["Type"] == "AWS::StepFunctions::StateMachine":
            found.append(props.get("DefinitionString"))
    return json.dumps(found)


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth", "trial_synth"])
def test_every_lambda_is_a_custom_resource_handler(fixture, request):
    """cdk/checkov.py suppresses the Lambda checks on that premise; a new kind of function must revisit them."""
    synth = request.getfixturevalue(fixture)
    for name, template in synth.raw_templates.items():
        references = _references(template)
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "AWS::Lambda::Function":
                assert f'"{logical_id}"' in references, f"{name}/{logical_id} is not a custom-resource handler"
