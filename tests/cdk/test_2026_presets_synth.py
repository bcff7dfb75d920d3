"""`-c imageModel=flux2-klein-4b`, `z-image-turbo` and `qwen-image` (the open models of 2026, NVIDIA only:
optimum-neuron has no pipeline for them), synthesized whole: the deploy stages the preset's weights and the GPU pods
ask for what only the preset's instance has, valid for the cluster. One synth per preset, for this module only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdk.accelerators import NVIDIA
from cdk.image.presets import PRESETS
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL
from tests.cdk.conftest import Synth, resources_of, synth
from tests.cdk.manifests import manifests
from tests.support.k8s_schema import validate_all

pytestmark = pytest.mark.synth

SERVING = "SdOnEksServing"
NEW_PRESETS = ("flux2-klein-4b", "z-image-turbo", "qwen-image")


@pytest.fixture(scope="module", params=NEW_PRESETS)
def preset_synth(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    yield synth(
        tmp_path_factory.mktemp(f"cdk-{request.param}"), {"imageModel": request.param, "accelerators": ["nvidia"]}
    )


def test_the_preset_stages_its_weights_and_its_pods_fit_their_instance(preset_synth: Synth) -> None:
    preset = PRESETS[preset_synth.config.serving.image_model]
    template = preset_synth.raw_templates[SERVING]
    staged = [v["Properties"]["PhysicalResourceId"] for k, v in resources_of(template, "Custom::ModelStaging").items()]
    assert f"weights-{preset.model_id.value.replace('/', '--').lower()}" in staged, staged
    objects = [m for m in manifests(template) if not m["metadata"]["name"].startswith("llm-")]
    (gpu,) = [m for m in objects if m["kind"] == "Deployment" and m["metadata"]["name"] == "sd-gpu"]
    pod = gpu["spec"]["template"]["spec"]
    assert pod["nodeSelector"][INSTANCE_TYPE_LABEL] == preset.nvidia.instance.name
    (container,) = pod["containers"]
    assert container["resources"]["limits"][NVIDIA.resource_name] == 1
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["MODEL_NAME"] == preset.model_id.value
    assert validate_all(objects, preset_synth.config.kubernetes_version) == []
