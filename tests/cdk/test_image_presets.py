"""The image model catalog (cdk/image/presets.py) without a synth: one setting picks a preset, a key the user gives
wins, a model outside the catalog names the fact it lacks, every preset's facts name their source, and the pure-function
manifests (compile Job, Deployments) carry the preset. That each preset's pods are pinned to the instance it names,
fit there beside the DaemonSets and that no cheaper instance of its families would do is the shared fit check's test,
tests/cdk/test_pod_fit.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cdk.accelerators import NEURON, NVIDIA
from cdk.build import resolve_context
from cdk.config import AppConfig
from cdk.config.context import ConfigError
from cdk.config.serving import COMPILE_SCRATCH_MODEL_COPIES, ServingConfig
from cdk.constructs.node_pools import ROOT_VOLUME_GIB
from cdk.image import neuron_compile_job as njob
from cdk.image import workload
from cdk.image.costs import preset_table, usd_per_1000_images
from cdk.image.presets import (
    DEFAULT_PRESET,
    FAMILY_KEY,
    FLUX_SCHNELL,
    PRESETS,
    SDXL_BASE,
    ImagePreset,
    PodSize,
)
from cdk.instance_types import InstanceType
from common.lora_keys import fused_variant
from tests.cdk.conftest import EXAMPLE_ENVIRONMENT, REPO_ROOT

CDK_JSON: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sd:neuron-abc"


def serving(**given: Any) -> ServingConfig:
    """The serving settings `cdk synth -c key=value ...` reads, with the preset applied as the app applies it."""
    return ServingConfig.from_context(resolve_context({**CDK_JSON, **given}))


def test_cdk_json_holds_the_default_presets_values():
    values = DEFAULT_PRESET.context()
    assert CDK_JSON["imageModel"] == DEFAULT_PRESET.name
    assert FAMILY_KEY not in CDK_JSON  # a model outside the catalog must name its own family
    assert {k: CDK_JSON[k] for k in values if k != FAMILY_KEY} == {k: v for k, v in values.items() if k != FAMILY_KEY}
    assert serving().family == "sd"


def test_one_setting_picks_sdxl_with_its_shapes_compile_and_prices():
    cfg = serving(imageModel="sdxl-base")
    compiled = cfg.compile_settings
    assert (cfg.model_id, cfg.family, cfg.image_model) == (SDXL_BASE.model_id.value, "sdxl", "sdxl-base")
    assert compiled.shapes == ((1024, 1024),)  # one SDXL pipeline per size: one surely fits the chip
    assert (compiled.tensor_parallel_size, compiled.devices, compiled.memory_gi) == (1, 1, 96)
    assert cfg.model_size_gi == 14 and compiled.scratch_gi >= COMPILE_SCRATCH_MODEL_COPIES * 14
    assert cfg.per_accelerator["neuron"].price_per_hour == SDXL_BASE.neuron.instance.usd_per_hour
    assert cfg.per_accelerator["neuron"].memory_gi == 48
    assert cfg.model_revision is None  # no source names a commit: first-deploy list


def test_the_hub_id_picks_its_preset_too():
    cfg = serving(servingModelId="black-forest-labs/FLUX.1-schnell", servingHubTokenSecretName="sd/hub-token")
    assert (cfg.image_model, cfg.family, cfg.neuron_devices) == ("flux-schnell", "flux", 4)
    assert cfg.compile_settings.tensor_parallel_size == 8
    platform = AppConfig.from_context(
        resolve_context(
            {
                **CDK_JSON,
                **EXAMPLE_ENVIRONMENT,
                "imageModel": "flux-schnell",
                "servingHubTokenSecretName": "sd/hub-token",
            }
        ),
        {},
    )
    (nvidia,) = [c for c in platform.capacity if c.name == "nvidia"]
    assert nvidia.instance_families == ("g6e",)


def test_a_key_the_user_gives_wins_over_the_preset():
    cfg = serving(imageModel="sdxl-base", servingMemoryGiNeuron=64, neuronCompileShapes="1024x1024")
    assert cfg.per_accelerator["neuron"].memory_gi == 64
    assert cfg.compile_settings.shapes == ((1024, 1024),)


def test_weights_brought_take_the_named_presets_facts_and_no_commit():
    cfg = serving(imageModel="sdxl-base", servingModelId="s3://my-weights/sdxl/")
    assert (cfg.model_id, cfg.family, cfg.model_revision, cfg.stages_weights) == (
        "s3://my-weights/sdxl/",
        "sdxl",
        None,
        False,
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"servingModelId": "someone/sd15-finetune"}, "imageModelFamily"),
        ({"servingModelId": "someone/sd15-finetune", FAMILY_KEY: "sd"}, "servingModelSizeGi"),
        ({"servingModelId": "someone/sd15-finetune", FAMILY_KEY: "sd", "servingModelSizeGi": 3}, "neuronCompileShapes"),
        ({"imageModel": "sd3"}, "imageModel"),
        ({"imageModel": "sdxl-base", "servingModelId": FLUX_SCHNELL.model_id.value}, "imageModel"),
        ({"neuronCompileWidth": 768}, "neuronCompileShapes"),
    ],
)
def test_what_the_synth_cannot_know_stops_it_naming_the_setting(given, named):
    with pytest.raises(ConfigError, match=f"'{named}'"):
        serving(**given)


def test_a_model_outside_the_catalog_runs_on_its_own_facts_at_its_main_branch():
    cfg = serving(
        servingModelId="someone/sd15-finetune",
        imageModelFamily="sd",
        servingModelSizeGi=3,
        neuronCompileShapes=["512x768"],
    )
    assert (cfg.family, cfg.model_size_gi, cfg.compile_settings.shapes) == ("sd", 3, ((512, 768),))
    assert cfg.model_revision is None and cfg.image_model == ""
    given = {
        **CDK_JSON,
        "servingModelId": "someone/sd15-finetune",
        FAMILY_KEY: "sd",
        "servingModelSizeGi": 3,
        "neuronCompileShapes": ["512x768"],
    }
    assert resolve_context(resolve_context(given)) == resolve_context(given)  # the test fixtures resolve twice
    nvidia_only = ServingConfig.from_context(
        resolve_context(
            {
                **CDK_JSON,
                "accelerators": "nvidia",
                "servingModelId": "someone/sd15-finetune",
                FAMILY_KEY: "sd",
                "servingModelSizeGi": 3,
            }
        ),
        accelerators=("nvidia",),
    )
    assert nvidia_only.neuron_compile is None


@pytest.mark.parametrize("preset", PRESETS.values(), ids=list(PRESETS))
def test_every_presets_model_facts_name_their_source(preset: ImagePreset):
    for fact in (preset.model_id, preset.licence, preset.size_gi):
        assert fact.source.strip()
    # FLUX.1-dev is not for commercial use: never a preset.
    assert "FLUX.1-dev" not in preset.model_id.value


@pytest.mark.parametrize("preset", PRESETS.values(), ids=list(PRESETS))
def test_every_presets_volumes_hold_the_model_on_the_nodes_disk(preset: ImagePreset):
    assert preset.size_gi.value <= preset.cache_gi < ROOT_VOLUME_GIB
    if preset.neuron_compile is None or preset.neuron is None:
        return  # NVIDIA only
    assert COMPILE_SCRATCH_MODEL_COPIES * preset.size_gi.value <= preset.neuron_compile.scratch_gi < ROOT_VOLUME_GIB
    assert preset.neuron.devices * 2 >= preset.neuron_compile.tensor_parallel_size


def test_the_manifests_carry_the_preset_without_a_synth():
    cfg = serving(imageModel="flux-schnell", servingHubTokenSecretName="sd/hub-token")
    job = njob.compile_job(cfg, image=IMAGE, bucket="model-store", region="us-east-1")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert [a for a in container["args"] if a.startswith("--shape=")] == [
        "--shape=1024x1024",
        "--shape=896x1152",
        "--shape=1152x896",
    ]
    assert "--tensor-parallel-size=8" in container["args"]
    assert container["resources"]["requests"][NEURON.resource_name] == 4
    assert container["resources"]["requests"]["memory"] == "192Gi"
    assert pod["schedulerName"]  # four devices: the Neuron scheduler extension places them
    scratch = next(v for v in pod["volumes"] if v["name"] == "cache")
    assert scratch["emptyDir"]["sizeLimit"] == "170Gi"
    for acc, devices, memory in ((NEURON, 4, "128Gi"), (NVIDIA, 1, "24Gi")):
        deployment = workload.deployment(acc, cfg, image=IMAGE, model_uri="s3://b/p/", region="us-east-1")
        (serve,) = deployment["spec"]["template"]["spec"]["containers"]
        assert serve["resources"]["requests"][acc.resource_name] == devices
        assert serve["resources"]["requests"]["memory"] == memory
    neuron_env = {
        e["name"]: e["value"]
        for e in workload.service_env(NEURON, cfg, "s3://b/p/", "us-east-1")
        if e["name"].startswith("NEURON_")
    }
    assert neuron_env == {
        "NEURON_BATCH_SIZE": "1",
        "NEURON_SHAPES": "1024x1024,896x1152,1152x896",
        "NEURON_TENSOR_PARALLEL_SIZE": "8",
    }


def test_fused_adapters_reach_the_compile_job_the_neuron_pods_and_their_own_artifact_prefix():
    fused = serving(neuronCompileLoras=["ink:0.8", "wash"])
    (container,) = njob.compile_job(fused, image=IMAGE, bucket="b", region="us-east-1")["spec"]["template"]["spec"][
        "containers"
    ]
    assert [a for a in container["args"] if a.startswith("--lora=")] == ["--lora=ink:0.8", "--lora=wash:1"]
    plain = serving()
    assert njob.artifact_prefix(fused) != njob.artifact_prefix(plain)
    assert njob.artifact_prefix(fused).rstrip("/").endswith("-" + fused_variant(fused.compile_settings.loras))
    assert njob.job_name(fused, IMAGE) != njob.job_name(plain, IMAGE)  # another compile, another (immutable) Job
    env = {e["name"]: e["value"] for e in workload.service_env(NEURON, fused, "s3://b/p/", "us-east-1", "s3://b/l/")}
    assert (env["NEURON_LORAS"], env["LORA_DIR"]) == ("ink:0.8,wash:1", "s3://b/l/")
    with pytest.raises(ConfigError, match=r"neuronCompileLoras.*scale 'x' is not a number"):
        serving(neuronCompileLoras=["ink:x"])


def test_the_compile_is_given_every_size_of_the_preset_and_its_degree():
    assert njob.shape_args(serving()) == ["--shape=512x512"]
    sdxl = serving(imageModel="sdxl-base")
    assert njob.shape_args(sdxl) == ["--shape=1024x1024"]  # one SDXL pipeline per size: only one surely fits a chip
    flux = serving(imageModel="flux-schnell", servingHubTokenSecretName="sd/hub-token")
    assert njob.shape_args(flux) == ["--shape=1024x1024", "--shape=896x1152", "--shape=1152x896"]
    args = njob.compile_job(sdxl, image="img", bucket="b", region="us-east-1")["spec"]["template"]["spec"]
    assert f"--tensor-parallel-size={sdxl.compile_settings.tensor_parallel_size}" in args["containers"][0]["args"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"imageModel": "sdxl-base", "neuronCompileShapes": ["1024x1024", "896x1152", "1152x896"]}, "36.9 GB in all"),
        (
            {
                "imageModel": "flux-schnell",
                "servingHubTokenSecretName": "sd/hub-token",
                "neuronCompileTensorParallelSize": 2,
                "servingNeuronDevices": 1,
            },
            "102 GB",
        ),
    ],
)
def test_sizes_whose_pipelines_cannot_fit_the_neuron_cores_stop_the_synth(overrides, message):
    with pytest.raises(ConfigError, match=rf"'neuronCompileShapes' lists 3 sizes: .*{message}.*NeuronCores"):
        serving(**overrides)


def test_the_cost_table_prices_every_preset_from_its_instance():
    table = preset_table()
    for preset in PRESETS.values():
        if preset.neuron is not None:
            assert f"| `{preset.name}` | Neuron | {preset.neuron.instance.name} |" in table
        else:
            assert f"| `{preset.name}` | Neuron |" not in table
        assert f"| `{preset.name}` | NVIDIA | {preset.nvidia.instance.name} |" in table
    pod = PodSize(InstanceType("x.large", "nvidia", 4, 16384, 58, 1, 0, 22888, 3.6), 1, 1, 1, 2.0, 60)
    assert usd_per_1000_images(pod) == pytest.approx(2.0)  # 2,000 s at $3.60 an hour


GATED = {"servingHubTokenSecretName": "sd/hub-token"}


def test_a_gated_preset_without_a_token_stops_naming_the_setting():
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "setting 'servingHubTokenSecretName' is required by the image model preset "
            "'flux-schnell': the Hub gates black-forest-labs/FLUX.1-schnell"
        ),
    ):
        serving(imageModel="flux-schnell")
    with pytest.raises(ConfigError, match="servingHubTokenSecretName"):
        serving(servingModelId="black-forest-labs/FLUX.1-schnell")
    # Weights brought or staged by hand are not fetched from the Hub: no token needed.
    assert serving(imageModel="flux-schnell", servingModelId="s3://weights/flux/").family == "flux"
    assert serving(imageModel="flux-schnell", servingStageWeights=False).family == "flux"


def test_the_neuron_cache_holds_every_compiled_size_the_pods_download():
    """Three Flux sizes of ~34 GB each are 95 GiB: the 48 GiB cache the preset had got its pods evicted in a loop."""
    with pytest.raises(ConfigError, match=r"'servingCacheSizeGi' = 48 cannot hold the 3 compiled sizes .* at least 95"):
        serving(imageModel="flux-schnell", servingCacheSizeGi=48, **GATED)
    assert serving(imageModel="flux-schnell", **GATED).cache_size_gi == 100
    one_size = serving(imageModel="flux-schnell", servingCacheSizeGi=48, neuronCompileShapes=["1024x1024"], **GATED)
    assert one_size.compile_settings.shape_names == ("1024x1024",)


@pytest.mark.parametrize("name", ["flux2-klein-4b", "z-image-turbo", "qwen-image"])
def test_a_2026_family_stops_on_neuron_naming_the_setting(name: str):
    preset = PRESETS[name]
    assert preset.neuron is None and preset.licence.value == "Apache-2.0"
    with pytest.raises(ConfigError, match=rf"setting 'accelerators' includes neuron, .* '{preset.family}' family"):
        serving(imageModel=name)
    cfg = ServingConfig.from_context(
        resolve_context({**CDK_JSON, "accelerators": "nvidia", "imageModel": name}), accelerators=("nvidia",)
    )
    assert (cfg.family, cfg.model_id) == (preset.family, preset.model_id.value)
    assert cfg.neuron_compile is None


def nvidia_serving(**given: Any) -> ServingConfig:
    """The serving settings of `cdk synth -c accelerators=nvidia -c key=value ...`, with the instance families checked
    as the app checks them."""
    values = resolve_context({**CDK_JSON, "accelerators": "nvidia", **given})
    families = {"nvidia": values["nvidiaInstanceFamilies"]}
    return ServingConfig.from_context(values, accelerators=("nvidia",), instance_families=families)


@pytest.mark.parametrize("preset", PRESETS.values(), ids=list(PRESETS))
def test_every_presets_bf16_weights_fit_its_instances_gpu(preset: ImagePreset):
    gpu = preset.nvidia.instance.gpu_memory_mib
    assert preset.gpu_weights_gb.source.strip()
    assert preset.gpu_weights_gb.value * 1e9 / 2**20 < gpu


def test_qwen_image_is_served_on_an_80_gb_gpu_at_its_price():
    cfg = nvidia_serving(imageModel="qwen-image")
    nvidia = cfg.per_accelerator["nvidia"]
    assert (cfg.family, cfg.model_id, cfg.image_model) == ("qwen-image", "Qwen/Qwen-Image", "qwen-image")
    assert nvidia.instance.name == "p5.4xlarge" and nvidia.instance.gpu_memory_mib == 81920
    assert nvidia.price_per_hour == 6.88  # Karpenter v1.14.1's us-east-1 table
    assert cfg.model_size_gi == 54 and cfg.cache_size_gi >= cfg.model_size_gi
    assert "| `qwen-image` | NVIDIA | p5.4xlarge | $6.88 | 70 | $133.78 |" in preset_table()


def test_qwen_image_on_a_48_gb_gpu_stops_the_synth_naming_the_setting():
    """Its 57.7 GB of bf16 weights outgrow an L40S (45776 MiB), even where the pool allows the g6e family."""
    message = (
        "setting 'servingInstanceTypeNvidia' = 'g6e.xlarge' has 45776 MiB of GPU memory, less than the 57.7 GB "
        "(55027 MiB) of bf16 weights the image model preset 'qwen-image' loads onto it: pick a type whose GPU holds "
        "them (p5.4xlarge)"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        nvidia_serving(imageModel="qwen-image", servingInstanceTypeNvidia="g6e.xlarge", nvidiaInstanceFamilies="g6e")
    with pytest.raises(ConfigError, match=re.escape(message)):  # weights brought take the preset's facts
        nvidia_serving(imageModel="qwen-image", servingModelId="s3://w/qwen/", servingInstanceTypeNvidia="g6e.xlarge")
    # The same instance holds the presets whose weights fit its GPU.
    assert nvidia_serving(imageModel="z-image-turbo").per_accelerator["nvidia"].instance.name == "g6e.xlarge"
