"""docs/architecture.md's recipes followed: a throwaway image model family (the service's `Family` entry, the deploy's
`ImageFamily`, a catalog preset) and a throwaway accelerator, each added through the steps the doc names and taken
through a synth of the whole app, one synth per recipe."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

import pytest

import app.models.families as service_families
from cdk import accelerators, node_fit, versions
from cdk.build import STACK_PREFIX
from cdk.config import platform
from cdk.config.context import ConfigError
from cdk.image import families as deploy_families
from cdk.image import workload as image_workload
from cdk.image.presets import PRESETS, SDXL_BASE
from cdk.instance_types import INSTANCE_TYPES
from cdk.llm.workload import GATEWAY_CONTAINER
from cdk.serving.catalog import Sourced
from tests.cdk.conftest import DEFAULT_CONTEXT, Synth, service_deployments, synth
from tests.cdk.manifests import manifests

pytestmark = pytest.mark.synth
KINDS: Final = ("NodePool", "Deployment")

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


# A throwaway accelerator: NVIDIA's facts under another name, resource and taint, on an instance family of its own.
ACCELERATOR: Final = dataclasses.replace(
    accelerators.NVIDIA, name="fakeacc", resource_name="example.com/fakeacc", taint_key="example.com/fakeacc"
)
INSTANCE: Final = dataclasses.replace(INSTANCE_TYPES["g6.xlarge"], name="fk1.xlarge", accelerator=ACCELERATOR.name)


def accelerator_context() -> dict[str, Any]:
    """cdk.json's per-accelerator keys for it (`<acc>...` and `...<Acc>`), NVIDIA's values on its own instance."""
    values: dict[str, Any] = {
        "accelerators": ["nvidia", ACCELERATOR.name],
        "fakeaccInstanceFamilies": [INSTANCE.family],
    }
    for key, value in DEFAULT_CONTEXT.items():
        if key.endswith("Nvidia"):
            values[key.removesuffix("Nvidia") + "Fakeacc"] = (
                INSTANCE.name if key.startswith("servingInstance") else value
            )
        elif key.startswith("nvidia") and key != "nvidiaInstanceFamilies":
            values["fakeacc" + key.removeprefix("nvidia")] = value
    return values


def add_the_accelerator(patch: pytest.MonkeyPatch) -> None:
    """The recipe's registrations (docs/architecture.md "How to add an accelerator"), in its order."""
    patch.setitem(accelerators.ACCELERATORS, ACCELERATOR.name, ACCELERATOR)  # 1
    patch.setitem(INSTANCE_TYPES, INSTANCE.name, INSTANCE)  # 2: its instance types
    patch.setitem(platform.ALLOWED_FAMILIES, ACCELERATOR.name, frozenset({INSTANCE.family}))
    patch.setitem(node_fit.DAEMONSETS, ACCELERATOR.name, node_fit.DAEMONSETS["nvidia"])
    patch.setitem(versions.BASE_IMAGES, ACCELERATOR.name, versions.BASE_IMAGES["nvidia"])  # 3: its base image
    patch.setitem(image_workload.DEPLOYMENT_NAMES, ACCELERATOR.name, "sd-fakeacc")  # 4: the image workload runs there


@pytest.fixture(scope="module")
def accelerator_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """NVIDIA and the throwaway accelerator, the LLM off (a workload that runs there adds its own names)."""
    with pytest.MonkeyPatch.context() as patch:  # undone before the module's other tests run
        add_the_accelerator(patch)
        return synth(tmp_path_factory.mktemp("cdk-accelerator"), accelerator_context())


def test_the_added_accelerator_gets_a_node_pool_and_the_image_pods(accelerator_synth):
    objects = [m for t in accelerator_synth.raw_templates.values() for m in manifests(t) if m.get("kind") in KINDS]
    pools = {m["metadata"]["name"]: m for m in objects if m["kind"] == "NodePool"}
    pool = next(p for p in pools.values() if p["spec"]["template"]["metadata"]["labels"] == ACCELERATOR.node_label)
    assert pool["spec"]["template"]["spec"]["taints"] == [ACCELERATOR.taint]
    (pod,) = [m for m in service_deployments(objects) if m["metadata"]["name"] == "sd-fakeacc"]
    spec = pod["spec"]["template"]["spec"]
    assert ACCELERATOR.toleration in spec["tolerations"]
    assert spec["containers"][0]["resources"]["limits"][ACCELERATOR.resource_name] == 1
