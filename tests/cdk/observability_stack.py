"""The dashboard and alarms built alone in a small Stack (no full-app synth), for the observability tests."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from cdk.accelerators import ACCELERATORS
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.image.observability import ImageObservability, JobQueues
from cdk.llm.dashboard import LlmDashboardInputs
from cdk.observability.alarms import ServingAlarms
from cdk.observability.dashboard import ServingDashboard
from cdk.observability.sections import DashboardView, Observed
from tests.cdk.conftest import DEFAULT_CONTEXT, DEFAULT_OVERRIDES

# The no-LLM dashboard and alarms as the code before the LLM section (f654e80) synthesized them, with the NVIDIA pod
# priced at the g6.xlarge it is pinned to since cdk/serving/pod_fit.py (regenerate
# only on purpose, with python -m tests.cdk.observability_stack golden).
GOLDEN = Path(__file__).parent / "golden" / "observability_without_llm.json"
# Both accelerators, the routing controller's weights, the job queues and an alarm topic: every optional row.
SERVING = ServingConfig.from_context(DEFAULT_CONTEXT | {"alarmTopicArn": DEFAULT_OVERRIDES["alarmTopicArn"]})
# cdk.json's LLM settings, switched on.
LLM = LlmConfig.from_context(DEFAULT_CONTEXT | {"llmEnabled": True})
# What the serving stack passes every workload, with literal names for its tokens.
VIEW = DashboardView(
    cluster_name="sd-cluster",
    namespace=SERVING.namespace,
    load_balancer="app/k8s-sd-0123456789/0123456789abcdef",
    routing_weights=True,
)


def image_inputs() -> ImageObservability:
    """The image workload's dashboard rows and alarms as the serving stack builds them."""
    accelerators = list(ACCELERATORS.values())
    return ImageObservability(
        accelerators=accelerators,
        price_per_hour={a.name: SERVING.per_accelerator[a.name].price_per_hour for a in accelerators},
        jobs=JobQueues("sd-jobs", "sd-jobs-dead-letters"),
    )


def llm_inputs() -> LlmDashboardInputs:
    """The LLM section's inputs as the stack builds them from cdk.json's LLM settings."""
    assert LLM is not None
    return LlmDashboardInputs.from_config(LLM, namespace=SERVING.namespace)


def observability_template(workloads: Sequence[Observed], config: ServingConfig = SERVING) -> dict[str, Any]:
    """The template of a Stack holding only the dashboard and the alarms of `workloads`."""
    stack = cdk.Stack(cdk.App(), "Observability")
    ServingDashboard(stack, "Dashboard", view=VIEW, workloads=workloads, name="sd-serving")
    ServingAlarms(stack, "Alarms", view=VIEW, workloads=workloads, config=config)
    return Template.from_stack(stack).to_json()


def dashboard_and_alarms(template: dict[str, Any]) -> dict[str, Any]:
    """The Dashboard and Alarm resources of a template, by logical id."""
    kinds = {"AWS::CloudWatch::Dashboard", "AWS::CloudWatch::Alarm"}
    return {k: v for k, v in template["Resources"].items() if v["Type"] in kinds}


def golden_text(template: dict[str, Any]) -> str:
    """The Dashboard and Alarm resources as GOLDEN holds them."""
    return json.dumps(dashboard_and_alarms(template), indent=1) + "\n"


if __name__ == "__main__":
    # golden: the no-LLM expectation (only when the image dashboard is meant to change).
    if sys.argv[1:] == ["golden"]:
        GOLDEN.write_text(golden_text(observability_template([image_inputs()])))
    else:
        sys.exit("usage: python -m tests.cdk.observability_stack golden")
