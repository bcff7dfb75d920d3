"""The composition root: which workloads the app serves. The only place outside a workload's own folder that
names one; `llmEnabled` decides whether the LLM joins the image service.
"""

from __future__ import annotations

from cdk.chassis.workload import Workload
from cdk.config import AppConfig
from cdk.image.serving import ImageServing
from cdk.llm.serving import LlmServing


def workloads_for(config: AppConfig) -> list[Workload]:
    """The workloads of `config`, in the order the stack applies and the front door lists them."""
    workloads: list[Workload] = [ImageServing(config.serving)]
    if config.llm is not None:
        workloads.append(LlmServing(config.llm))
    return workloads
