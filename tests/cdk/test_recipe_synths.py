"""docs/architecture.md's recipes followed: a throwaway image model family added through the steps the doc names
(the service's `Family` entry, the deploy's `ImageFamily`, a catalog preset) and taken through a synth of the whole
app, one synth for the recipe."""

from __future__ import annotations

import dataclasses
import json
from typing import Final

import pytest

import app.models.families as service_families
from cdk.build import STACK_PREFIX
from cdk.config.context import ConfigError
from cdk.image import families as deploy_families
from cdk.image.presets import PRESETS, SDXL_BASE
from cdk.llm.workload import GATEWAY_CONTAINER
from cdk.serving.catalog import Sourced
from tests.cdk.conftest import Synth, service_deployments, synth
from tests.cdk.manifests import manifests

pytestmark = pytest.mark.synth

FAMILY: Final = service_families.Family(
    name="throwaway",
    title="Throwaway",
    pipeline_classes=("ThrowawayPipeline",),
    native_sizes=((1024, 1024),),
    reference_side=1024,
    default_steps=20,
    default_guidance=4.0,
    min_side=256,
    max_side=1024,
    multiple_of=16,
    negative_prompt=True,
)
# SDXL's pods, instances and compile plan, under another name and family.
PRESET: Final = dataclasses.replace(
    SDXL_BASE, name="throwaway-model", model_id=Sourced("example-org/throwaway", "a test"), family=FAMILY.name
)


def add_the_family(patch: pytest.MonkeyPatch, *, deploy_facts: bool = True) -> None:
    """The recipe's registrations: the service's family, the deploy's facts of it, and a preset of it."""
    patch.setattr(service_families, "FAMILIES", (*service_families.FAMILIES, FAMILY))
    if deploy_facts:
        patch.setitem(deploy_families.FAMILIES, FAMILY.name, deploy_families.ImageFamily(FAMILY.name, 12.0))
    patch.setitem(PRESETS, PRESET.name, PRESET)


@pytest.fixture(scope="module")
def family_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default settings (both accelerators) serving the throwaway family's preset."""
    with pytest.MonkeyPatch.context() as patch:  # undone before the module's other tests run
        add_the_family(patch)
        return synth(tmp_path_factory.mktemp("cdk-family"), {"imageModel": PRESET.name, "llmEnabled": True})


def test_the_service_knows_the_added_family():
    with pytest.MonkeyPatch.context() as patch:
        add_the_family(patch)
        assert service_families.family_of_class("ThrowawayPipeline") is FAMILY
        assert service_families.family_named("throwaway") is FAMILY


def test_the_added_family_is_deployed(family_synth):
    assert family_synth.config.serving.family == FAMILY.name
    objects = manifests(family_synth.raw_templates[f"{STACK_PREFIX}Serving"])
    pods = service_deployments(objects)
    assert len(pods) == 2
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["MODEL_NAME"] == "example-org/throwaway"
    told = {
        {e["name"]: e.get("value") for e in c["env"]}["IMAGE_MODELS"]
        for m in objects
        if m["kind"] == "Deployment"
        for c in m["spec"]["template"]["spec"]["containers"]
        if c["name"] == GATEWAY_CONTAINER
    }
    assert told == {json.dumps({"example-org/throwaway": "throwaway"})}


def test_a_family_without_its_deploy_facts_stops_the_synth_naming_the_setting(tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        add_the_family(patch, deploy_facts=False)
        with pytest.raises(ConfigError, match="imageModelFamily"):
            synth(tmp_path, {"imageModel": PRESET.name})
