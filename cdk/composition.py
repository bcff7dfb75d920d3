"""The composition root: which workloads the app serves. The only module outside a workload's own folder and the
settings (cdk/config/) that names one (tests/cdk/test_architecture_recipes.py holds it so): `llmEnabled` decides
whether the LLM joins the image service; a workload's catalog defaults and price table reach the app from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdk.chassis.workload import Workload
from cdk.config import AppConfig
from cdk.image.costs import preset_table
from cdk.image.presets import apply_image_model
from cdk.image.serving import ImageServing
from cdk.llm.serving import LlmServing


def workloads_for(config: AppConfig) -> list[Workload]:
    """The workloads of `config`, in the order the stack applies and the front door lists them."""
    workloads: list[Workload] = [ImageServing(config.serving)]
    if config.llm is not None:
        workloads.append(LlmServing(config.llm))
    return workloads


def apply_catalog_defaults(context: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The context with the chosen catalog presets' values applied (the image model's, `imageModel`), before any
    workload exists: the settings are read from the result. `defaults`: cdk.json's context."""
    return apply_image_model(context, defaults)


def catalog_cost_tables() -> list[str]:
    """The markdown cost table of each workload's model catalog (`python -m cdk.costs`)."""
    return [preset_table()]
