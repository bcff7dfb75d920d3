"""No wait in the deploy outlasts what CloudFormation or the Lambda doing the waiting allows.

CloudFormation gives a custom resource at most 3600 s to answer (ServiceTimeout 1-3600, default
3600); a Lambda that waits inside one invocation must finish its wait before its own timeout, with
time left to report. Walks every synthesized template, so a new wait is checked too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cdk.conftest import resources_of

CLOUDFORMATION_LIMIT_S = 3600
MARGIN_S = 120  # left to a waiting Lambda or state machine to report its own failure
KUBECTL_HANDLER = "onEvent handler for EKS kubectl resource provider"  # aws-eks-v2 kubectl-provider.ts
RETRY = re.compile(r'"IntervalSeconds":(\d+),"MaxAttempts":(\d+),"BackoffRate":([\d.]+)')


def _all(synth) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for stack, template in synth.raw_templates.items():
        for logical_id, resource in template.get("Resources", {}).items():
            yield stack, logical_id, resource


def _kubectl_handler_timeout(synth) -> int:
    (timeout,) = {
        r["Properties"]["Timeout"]
        for _, _, r in _all(synth)
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Description") == KUBECTL_HANDLER
    }
    return int(timeout)


def _seconds(value: str) -> int:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", value)
    assert match and value, value
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_kubectl_waits_end_before_the_handler_lambda_dies(fixture, request):
    synth = request.getfixturevalue(fixture)
    handler = _kubectl_handler_timeout(synth)
    waits = {}
    for stack, logical_id, resource in _all(synth):
        props = resource.get("Properties", {})
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesObjectValue":
            waits[(stack, logical_id)] = int(props["TimeoutSeconds"])
        if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart" and props.get("Wait"):
            # A chart without its own timeout waits helm's default of 5 minutes.
            waits[(stack, logical_id)] = _seconds(props.get("Timeout", "300s"))
    assert any("KubernetesObjectValue" in str(r["Type"]) for _, _, r in _all(synth))
    assert waits
    too_long = {k: v for k, v in waits.items() if v + MARGIN_S > handler}
    assert not too_long, f"waits that outlive the {handler}s kubectl handler: {too_long}"


def test_provider_waiters_answer_within_the_custom_resource_limit(platform_synth):
    checked = 0
    for stack, logical_id, resource in _all(platform_synth):
        if resource["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        definition = json.dumps(resource["Properties"]["DefinitionString"]).replace('\\"', '"')
        for interval, attempts, backoff in RETRY.findall(definition):
            assert float(backoff) == 1, (stack, logical_id)
            total = int(interval) * int(attempts)
            assert total + MARGIN_S <= CLOUDFORMATION_LIMIT_S, (stack, logical_id, total)
            checked += 1
    assert checked  # the image builds' waiter is among them


def test_no_custom_resource_asks_for_more_than_the_limit(platform_synth, variant_synth):
    for synth in (platform_synth, variant_synth):
        for stack, logical_id, resource in _all(synth):
            if resource["Type"].startswith("Custom::") or resource["Type"] == "AWS::CloudFormation::CustomResource":
                timeout = resource.get("Properties", {}).get("ServiceTimeout", CLOUDFORMATION_LIMIT_S)
                assert int(timeout) <= CLOUDFORMATION_LIMIT_S, (stack, logical_id)


def test_the_image_build_handler_reports_before_its_waiter_ends(platform_synth):
    template = platform_synth.raw_templates["SdOnEksImages"]
    report_after = [
        int(f["Properties"]["Environment"]["Variables"]["REPORT_AFTER_SECONDS"])
        for f in resources_of(template, "AWS::Lambda::Function").values()
        if "REPORT_AFTER_SECONDS" in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    (machine,) = resources_of(template, "AWS::StepFunctions::StateMachine").values()
    interval, attempts, _ = RETRY.findall(json.dumps(machine["Properties"]["DefinitionString"]).replace('\\"', '"'))[0]
    assert report_after == [report_after[0]]
    # One more poll after the handler gives up still fits in the waiter.
    assert report_after[0] + int(interval) < int(interval) * int(attempts)


def _image_build_projects_limit_s(template: dict[str, Any]) -> int:
    """The longest an image build can take in CodeBuild: queued, then run, each to its timeout."""
    limits = []
    for project in resources_of(template, "AWS::CodeBuild::Project").values():
        props = project["Properties"]
        # CodeBuild's defaults: 60 minutes to run, 480 minutes in the queue.
        limits.append(60 * (int(props.get("TimeoutInMinutes", 60)) + int(props.get("QueuedTimeoutInMinutes", 480))))
    assert limits
    return max(limits)


@pytest.mark.parametrize("fixture", ["platform_synth", "variant_synth"])
def test_a_first_deploy_outwaits_its_longest_image_build(fixture, request):
    """A first deploy that stopped waiting would roll back and delete the repository and the build's role
    under the still-running build; so the chain of wait resources outlasts any build it waits for."""
    template = request.getfixturevalue(fixture).raw_templates["SdOnEksImages"]
    stages = {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "Custom::ImageBuilds"
    }
    # A resource without the properties is a chain of one (lambdas/codebuild_runner.py).
    by_stage = {int(r["Properties"].get("WaitStage", 1)): logical_id for logical_id, r in stages.items()}
    count = len(stages)
    assert sorted(by_stage) == list(range(1, count + 1))
    assert {int(r["Properties"].get("WaitStages", 1)) for r in stages.values()} == {count}
    # Each stage waits for the one before, so their waits add up.
    for stage in range(2, count + 1):
        assert by_stage[stage - 1] in stages[by_stage[stage]].get("DependsOn", []), stage
    # All stages wait for the same builds.
    assert len({json.dumps(r["Properties"]["Builds"], sort_keys=True) for r in stages.values()}) == 1
    (report_after,) = {
        int(f["Properties"]["Environment"]["Variables"]["REPORT_AFTER_SECONDS"])
        for f in resources_of(template, "AWS::Lambda::Function").values()
        if "REPORT_AFTER_SECONDS" in f["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert report_after + MARGIN_S <= CLOUDFORMATION_LIMIT_S
    assert count * report_after > _image_build_projects_limit_s(template)
