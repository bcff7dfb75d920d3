"""cdk/serving/pod_fit.py, the one fit check every accelerated workload calls: each pod the stacks build (the LLM
replicas, the image pods, the Neuron compile Job) per preset is pinned to the instance it is priced at and fits there
beside the DaemonSets; a pod that does not stops the synth naming the setting. Built from the real builders, no synth
(tests/cdk/test_image_model_synth.py and tests/cdk/test_llm_serving.py hold the same in synthesized templates)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from cdk.accelerators import ACCELERATORS
from cdk.build import resolve_context
from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from cdk.image import neuron_compile_job as njob
from cdk.image import workload as image_workload
from cdk.image.presets import PRESETS as IMAGE_PRESETS
from cdk.image.presets import ImagePreset
from cdk.instance_types import INSTANCE_TYPES, InstanceType
from cdk.llm.presets import PRESETS as LLM_PRESETS
from cdk.llm.presets import LlmPreset
from cdk.node_fit import allocatable, daemonset_requests, pod_requests
from cdk.serving.pod_fit import INSTANCE_TYPE_LABEL, FitSettings, device_requests, require_fit
from tests.cdk.conftest import REPO_ROOT
from tests.cdk.test_llm_workload import build, configs, pod

CDK_JSON: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:neuron-abc"
TOKEN = {"servingHubTokenSecretName": "sd/hub-token"}


def image_serving(**given: Any) -> ServingConfig:
    """The serving settings `cdk synth -c key=value ...` reads, with the image preset applied as the app applies it."""
    return ServingConfig.from_context(resolve_context({**CDK_JSON, **given}))


def image_pod(acc_name: str, cfg: ServingConfig) -> dict[str, Any]:
    deployment = image_workload.deployment(
        ACCELERATORS[acc_name], cfg, image=IMAGE, model_uri="s3://b/p/", region="us-east-1"
    )
    return deployment["spec"]["template"]["spec"]


def compile_pod(cfg: ServingConfig) -> dict[str, Any]:
    return njob.compile_job(cfg, image=IMAGE, bucket="model-store", region="us-east-1")["spec"]["template"]["spec"]


def llm_pod(preset: LlmPreset, acc_name: str) -> dict[str, Any]:
    llm, cfg = configs(llmModel=preset.name, **(TOKEN if preset.gated.value else {}))
    return pod(build(ACCELERATORS[acc_name], llm, cfg))


def assert_pinned_and_fits(spec: dict[str, Any], instance: InstanceType) -> None:
    assert spec["nodeSelector"][INSTANCE_TYPE_LABEL] == instance.name
    assert fits(spec, instance), (pod_requests(spec), allocatable(instance))


def fits(spec: dict[str, Any], instance: InstanceType) -> bool:
    need = pod_requests(spec) + daemonset_requests(instance.accelerator)
    room = allocatable(instance)
    devices = device_requests(spec, ACCELERATORS[instance.accelerator].resource_name)
    return need.cpu_m <= room.cpu_m and need.memory_mib <= room.memory_mib and devices <= instance.devices


@pytest.mark.parametrize("preset", LLM_PRESETS.values(), ids=lambda p: p.name)
@pytest.mark.parametrize("acc", ["neuron", "nvidia"])
def test_each_llm_presets_pod_is_pinned_to_its_instance_and_fits_there(preset: LlmPreset, acc: str):
    assert_pinned_and_fits(llm_pod(preset, acc), INSTANCE_TYPES[preset.per_accelerator[acc].instance_type])


def preset_serving(preset: ImagePreset) -> ServingConfig:
    """The preset's settings as its synth reads them: a token where the Hub gates it, NVIDIA alone where Neuron
    has no pipeline for its family."""
    given: dict[str, Any] = {"imageModel": preset.name}
    if preset.gated.value:
        given["servingHubTokenSecretName"] = "sd/hub-token"
    if preset.neuron is None:
        return ServingConfig.from_context(
            resolve_context({**CDK_JSON, **given, "accelerators": "nvidia"}), accelerators=("nvidia",)
        )
    return image_serving(**given)


def served_pods(preset: ImagePreset, cfg: ServingConfig) -> dict[str, tuple[dict[str, Any], InstanceType]]:
    """Each pod of the preset and the instance it is pinned to."""
    pods = {"nvidia serving": (image_pod("nvidia", cfg), preset.nvidia.instance)}
    if preset.neuron is not None and preset.neuron_compile is not None:
        pods["neuron serving"] = (image_pod("neuron", cfg), preset.neuron.instance)
        pods["compile"] = (compile_pod(cfg), preset.neuron_compile.instance)
    return pods


@pytest.mark.parametrize("preset", IMAGE_PRESETS.values(), ids=lambda p: p.name)
def test_each_image_presets_pods_are_pinned_to_their_instance_and_fit_there(preset: ImagePreset):
    cfg = preset_serving(preset)
    for spec, instance in served_pods(preset, cfg).values():
        assert_pinned_and_fits(spec, instance)
    # The routing weights, the dashboards and `python -m cdk.costs` read the price of the pinned instance.
    for acc, size in (("neuron", preset.neuron), ("nvidia", preset.nvidia)):
        if size is not None:
            assert cfg.per_accelerator[acc].price_per_hour == size.instance.usd_per_hour


@pytest.mark.parametrize("preset", IMAGE_PRESETS.values(), ids=lambda p: p.name)
def test_each_image_preset_names_the_cheapest_instance_of_its_families_that_fits(preset: ImagePreset):
    cfg = preset_serving(preset)
    families = {"neuron": ("inf2",), "nvidia": preset.nvidia_families}
    pods = served_pods(preset, cfg)
    for what, (spec, named) in pods.items():
        allowed = families[named.accelerator]
        candidates = [it for it in INSTANCE_TYPES.values() if it.accelerator == named.accelerator]
        candidates = [it for it in candidates if it.family in allowed]
        cheapest = min((it for it in candidates if fits(spec, it)), key=lambda it: it.usd_per_hour)
        assert cheapest.name == named.name, f"{preset.name} {what}: {cheapest.name} fits for less than {named.name}"


@pytest.mark.parametrize(
    ("given", "build_pod", "message"),
    [
        (
            {"servingCpuNvidia": 3.5},
            lambda cfg: image_pod("nvidia", cfg),
            "lower 'servingCpuNvidia' by 305m, or pick a larger 'servingInstanceTypeNvidia'",
        ),
        ({"servingMemoryGiNeuron": 14}, lambda cfg: image_pod("neuron", cfg), "lower 'servingMemoryGiNeuron' by"),
        (
            {"servingNeuronDevices": 2},
            lambda cfg: image_pod("neuron", cfg),
            "asks for 2 accelerator devices, more than 'servingInstanceTypeNeuron' = 'inf2.xlarge' has (1): lower "
            "'servingNeuronDevices'",
        ),
        (
            {"neuronCompileMemoryGi": 120},
            compile_pod,
            "the Neuron compile pod requests 16000m CPU and 122880 MiB; with the platform's DaemonSets (731m, 311 MiB) "
            "that is more than 'neuronCompileInstanceType' = 'inf2.8xlarge' offers",
        ),
    ],
)
def test_an_image_pod_too_large_for_its_instance_stops_the_synth_naming_the_setting(given, build_pod, message):
    cfg = image_serving(**given)
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_pod(cfg)


def test_a_larger_instance_setting_takes_the_grown_pod_and_its_price():
    cfg = image_serving(servingCpuNvidia=6, servingMemoryGiNvidia=24, servingInstanceTypeNvidia="g6.2xlarge")
    assert_pinned_and_fits(image_pod("nvidia", cfg), INSTANCE_TYPES["g6.2xlarge"])
    assert cfg.per_accelerator["nvidia"].price_per_hour == INSTANCE_TYPES["g6.2xlarge"].usd_per_hour
    # An explicit price (a Savings Plan, another region) still wins.
    assert image_serving(costPricePerHourNvidia=0.5).per_accelerator["nvidia"].price_per_hour == 0.5


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"servingInstanceTypeNvidia": "inf2.xlarge"}, "'servingInstanceTypeNvidia' = 'inf2.xlarge' is invalid"),
        ({"nvidiaInstanceFamilies": ["g5"]}, "'servingInstanceTypeNvidia' = 'g6.xlarge' is of family g6"),
        ({"neuronCompileInstanceType": "g6.xlarge"}, "'neuronCompileInstanceType' = 'g6.xlarge' is invalid"),
    ],
)
def test_an_instance_the_pool_cannot_launch_names_the_setting(given, message):
    from cdk.config import AppConfig
    from tests.cdk.conftest import EXAMPLE_ENVIRONMENT

    with pytest.raises(ConfigError, match=re.escape(message)):
        AppConfig.from_context(resolve_context({**CDK_JSON, **EXAMPLE_ENVIRONMENT, **given}), {})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"llmCpuNeuron": 3}, "lower 'llmCpuNeuron' by 61m, or pick a larger 'llmInstanceTypeNeuron'"),
        ({"llmMemoryGiNvidia": 14}, "lower 'llmMemoryGiNvidia' by 741 MiB"),
    ],
)
def test_an_llm_pod_too_large_for_its_instance_stops_the_synth_naming_the_setting(extra, message):
    llm, cfg = configs(**extra)
    acc = ACCELERATORS["neuron" if "Neuron" in next(iter(extra)) else "nvidia"]
    with pytest.raises(ConfigError, match=re.escape(message)):
        build(acc, llm, cfg)


def test_the_check_reads_the_pod_it_is_given():
    llm, cfg = configs()
    # A copy: the built containers share the workload's resource constants.
    spec = copy.deepcopy(pod(build(ACCELERATORS["nvidia"], llm, cfg)))
    spec["containers"][1]["resources"]["requests"]["cpu"] = "2"  # the gateway grown past the node
    settings = FitSettings("a pod", "instanceKey", "cpuKey", "memoryKey", "devicesKey")
    with pytest.raises(ConfigError, match=re.escape("lower 'cpuKey' by 1305m, or pick a larger 'instanceKey'")):
        require_fit(spec, llm.per_accelerator["nvidia"].instance, settings)
    gpus = copy.deepcopy(pod(build(ACCELERATORS["nvidia"], llm, cfg)))
    gpus["containers"][0]["resources"]["requests"][ACCELERATORS["nvidia"].resource_name] = 2
    with pytest.raises(ConfigError, match=re.escape("asks for 2 accelerator devices, more than 'instanceKey'")):
        require_fit(gpus, llm.per_accelerator["nvidia"].instance, settings)
