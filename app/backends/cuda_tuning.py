"""The CUDA backend's speed work: each step one setting, so its gain can be measured alone.

`apply_speed_settings()` changes a loaded diffusers pipeline (SD, SDXL or a transformer family) in this
order (each step needs the previous one's result):

1. dtype (`CUDA_DTYPE`): bf16/fp16 weights and activations. Skipped on CPU, where half precision
   is slower than fp32 on most processors and the CPU path stays as loaded.
2. attention (`CUDA_SDPA`): PyTorch's scaled-dot-product attention, which picks the flash or
   memory-efficient kernel on a GPU; off gives diffusers' plain attention, for comparison.
3. fused QKV (`CUDA_FUSE_QKV`): one matrix product for query, key and value (key and value in
   cross-attention) in the UNet and the VAE. Needs step 2's SDPA processors; skipped with LORA_DIR set.
4. channels-last (`CUDA_CHANNELS_LAST`): NHWC memory layout for UNet and VAE convolutions, the
   layout tensor cores read without transposes.
5. compile (`CUDA_COMPILE`, `CUDA_GRAPHS`, `CUDA_INDUCTOR_TUNING`): `torch.compile` of the UNet
   and the VAE decoder with static shapes. CUDA graphs are on when the mode includes them
   (reduce-overhead, max-autotune) or `CUDA_GRAPHS` is set; they need a GPU, so on CPU such a
   compile is skipped. The text encoder stays eager: it runs once per batch, not once per step.
6. step cache (`CUDA_STEP_CACHE`, `CUDA_STEP_CACHE_THRESHOLD`): diffusers' first-block cache on the
   denoiser (app/backends/step_cache.py), last because it hooks the blocks as the steps above left them.
   Skipped where the family's denoiser has none, and with a compile: the cache decides per step in
   Python (a graph break), which a whole-graph compile refuses.

A skipped step is logged with its reason; nothing here breaks the CPU path. `warm_up()` then runs
every served shape once, so compilation (minutes with max-autotune) happens at start-up rather
than in a user's request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from app.backends.diffusers_backend import denoiser
from app.backends.step_cache import enable_step_cache, unsupported_reason
from app.settings import Settings

logger = logging.getLogger(__name__)

# How far an optimized image may be from the eager pipeline's at the same seed and dtype: mean
# absolute difference of pixels scaled to 0..1. Fusing, re-layout and compiling reorder float
# sums, which moves pixels by a few thousandths; 2% keeps room for bf16 rounding over 50 steps
# while catching a wrong kernel, which moves them by tenths.
IMAGE_TOLERANCE_MEAN_ABS = 0.02

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_MODES_WITH_GRAPHS = {"reduce-overhead", "max-autotune"}
# Inductor flags diffusers' guide to faster diffusion recommends for UNets on GPUs.
_INDUCTOR_TUNING = {
    "conv_1x1_as_mm": True,
    "coordinate_descent_tuning": True,
    "coordinate_descent_check_all_directions": True,
    "epilogue_fusion": False,
}


# Compiled kernels depend on shapes, not step counts; CUDA graph trees record on the second call
# and replay from the third, so three steps warm everything up.
WARM_UP_STEPS = 3


@dataclass(frozen=True)
class SpeedStep:
    """One step of the speed work: what it does, or why it is skipped on this device."""

    name: str
    detail: str
    skipped: str | None = None


@dataclass(frozen=True)
class ServedShape:
    """One shape the service runs: compile specializes on batch size and image size."""

    batch: int
    height: int
    width: int


def plan_speed_settings(settings: Settings, device_type: str, denoiser_class: str | None = None) -> list[SpeedStep]:
    """The steps `apply_speed_settings` takes for `settings` on a device of `device_type`.

    `denoiser_class` (the UNet's or transformer's class name) decides whether the step cache applies; None
    plans it as if the denoiser could take it.
    """
    on_cuda = device_type == "cuda"
    steps: list[SpeedStep] = []

    if settings.cuda_dtype == "fp32":
        steps.append(SpeedStep("dtype", "fp32", skipped="fp32 requested"))
    elif not on_cuda:
        steps.append(SpeedStep("dtype", settings.cuda_dtype, skipped=f"{device_type}: half precision is slower here"))
    else:
        steps.append(SpeedStep("dtype", settings.cuda_dtype))

    steps.append(SpeedStep("attention", "SDPA" if settings.cuda_sdpa else "plain"))

    if not settings.cuda_fuse_qkv:
        steps.append(SpeedStep("fuse_qkv", "UNet+VAE", skipped="CUDA_FUSE_QKV off"))
    elif not settings.cuda_sdpa:
        steps.append(SpeedStep("fuse_qkv", "UNet+VAE", skipped="fused processors are SDPA ones; CUDA_SDPA is off"))
    elif settings.lora_dir is not None:
        # LoRA adapters add their layers to to_q/to_k/to_v, which the fused to_qkv projection would bypass.
        reason = "LORA_DIR is set: adapters act on the unfused projections"
        steps.append(SpeedStep("fuse_qkv", "UNet+VAE", skipped=reason))
    else:
        steps.append(SpeedStep("fuse_qkv", "UNet+VAE"))

    if settings.cuda_channels_last:
        steps.append(SpeedStep("channels_last", "UNet+VAE"))
    else:
        steps.append(SpeedStep("channels_last", "UNet+VAE", skipped="CUDA_CHANNELS_LAST off"))

    graphs = settings.cuda_compile in _MODES_WITH_GRAPHS or settings.cuda_graphs
    detail = settings.cuda_compile + (" +cudagraphs" if graphs else "")
    if settings.cuda_compile == "off":
        reason = "CUDA_COMPILE off" + ("; CUDA graphs are captured through compile" if settings.cuda_graphs else "")
        steps.append(SpeedStep("compile", "off", skipped=reason))
    elif graphs and not on_cuda:
        steps.append(SpeedStep("compile", detail, skipped=f"{device_type}: CUDA graphs need a GPU"))
    else:
        if on_cuda and settings.cuda_inductor_tuning:
            detail += " +inductor tuning"
        steps.append(SpeedStep("compile", detail))

    cache = f"first-block {settings.cuda_step_cache_threshold:g}"
    no_cache = None if denoiser_class is None else unsupported_reason(denoiser_class)
    if not settings.cuda_step_cache:
        steps.append(SpeedStep("step_cache", cache, skipped="CUDA_STEP_CACHE off"))
    elif settings.cuda_compile != "off":
        reason = "the cache decides per step in Python (a graph break); CUDA_COMPILE compiles the denoiser whole"
        steps.append(SpeedStep("step_cache", cache, skipped=reason))
    elif no_cache is not None:
        steps.append(SpeedStep("step_cache", cache, skipped=no_cache))
    else:
        steps.append(SpeedStep("step_cache", cache))
    return steps


def load_dtype(settings: Settings, device_type: str) -> torch.dtype:
    """The dtype to load weights in: CUDA_DTYPE on a GPU, fp32 elsewhere (as step 1 leaves it)."""
    return _DTYPES[settings.cuda_dtype] if device_type == "cuda" else torch.float32


def describe(steps: Iterable[SpeedStep]) -> str:
    """A one-line summary of the applied steps, for logs and benchmark tables."""
    applied = [f"{s.name}={s.detail}" for s in steps if s.skipped is None]
    return ", ".join(applied) or "none"


def compile_options(settings: Settings, on_cuda: bool) -> dict[str, Any]:
    """Inductor options for `torch.compile`: the mode's own, plus graphs and tuning as set.

    Options rather than `mode=` because torch.compile takes one or the other, and CUDA_GRAPHS and
    CUDA_INDUCTOR_TUNING add to whichever mode is chosen.
    """
    from torch._inductor import list_mode_options

    options: dict[str, Any] = dict(list_mode_options(settings.cuda_compile))
    if settings.cuda_graphs:
        options["triton.cudagraphs"] = True
    if on_cuda and settings.cuda_inductor_tuning:
        options.update(_INDUCTOR_TUNING)
    return options


def apply_speed_settings(pipe: Any, settings: Settings) -> Any:
    """Apply the CUDA speed settings to a loaded diffusers pipeline of a served family, in the module's order.

    The pipeline must already be on its device; it is changed in place and returned.
    """
    from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

    device_type = pipe.device.type
    net = denoiser(pipe)
    unet_family = getattr(pipe, "unet", None) is not None
    for step in plan_speed_settings(settings, device_type, type(net).__name__):
        if step.skipped is not None:
            logger.info("speed step %s (%s) skipped: %s", step.name, step.detail, step.skipped)
            continue
        logger.info("speed step %s: %s", step.name, step.detail)
        if step.name == "dtype":
            pipe.to(dtype=_DTYPES[settings.cuda_dtype])
        elif step.name == "attention":
            processor = AttnProcessor2_0 if settings.cuda_sdpa else AttnProcessor
            # Flux's transformer keeps its own processors (rotary embeddings; SDPA already): only the
            # UNet and the VAE take the generic ones.
            for model in _models_with([net] if unet_family else [], pipe.vae, method="set_attn_processor"):
                model.set_attn_processor(processor())
        elif step.name == "fuse_qkv":
            for model in _models_with([net], pipe.vae, method="fuse_qkv_projections"):
                model.fuse_qkv_projections()
        elif step.name == "channels_last":
            # A memory format for 2-D convolutions: the UNet's and an image VAE's, not a transformer's nor a
            # video VAE's 3-D ones (Qwen-Image's), which channels-last cannot lay out.
            for model in [net] if unet_family else []:
                model.to(memory_format=torch.channels_last)
            if any(p.dim() == 5 for p in pipe.vae.parameters()):
                logger.info("speed step channels_last: %s skipped: 3-D convolutions", type(pipe.vae).__name__)
            else:
                pipe.vae.to(memory_format=torch.channels_last)
        elif step.name == "compile":
            options = compile_options(settings, on_cuda=device_type == "cuda")
            # Static shapes: warm_up compiles each served shape once, and a kernel specialized
            # for one shape is faster than a dynamic one.
            compiled = torch.compile(net, fullgraph=True, dynamic=False, options=options)
            setattr(pipe, "unet" if unet_family else "transformer", compiled)
            pipe.vae.decode = torch.compile(pipe.vae.decode, fullgraph=True, dynamic=False, options=options)
        elif step.name == "step_cache":
            enable_step_cache(net, settings.cuda_step_cache_threshold)
    return pipe


def _models_with(models: list[Any], vae: Any, *, method: str) -> list[Any]:
    """`models` and the VAE, less those without `method` (Z-Image's transformer has no fused QKV, Qwen-Image's
    VAE no attention processors), each of those logged."""
    found = []
    for model in [*models, vae]:
        if hasattr(model, method):
            found.append(model)
        else:
            logger.info("speed step: %s skipped for %s, which has no %s", method, type(model).__name__, method)
    return found


def served_shapes(settings: Settings, height: int, width: int) -> list[ServedShape]:
    """Every shape the batching worker can run at one image size: batch 1..MAX_BATCH_SIZE."""
    return [ServedShape(batch, height, width) for batch in range(1, settings.max_batch_size + 1)]


def run_shape(
    pipe: Any,
    shape: ServedShape,
    *,
    steps: int,
    guidance_scale: float,
    prompt: str,
    arguments: Mapping[str, Any] | None = None,
) -> None:
    """One pipeline call at `shape`, seeded, as the service runs it (guidance > 1 doubles the UNet batch).

    `arguments`, when given, are the family's own call arguments (app.backends.base.family_arguments) and
    replace `guidance_scale`: a Flux model takes no guidance but a fixed T5 prompt length.
    """
    pipe(
        prompt=[prompt] * shape.batch,
        height=shape.height,
        width=shape.width,
        num_inference_steps=steps,
        generator=torch.Generator(pipe.device).manual_seed(0),
        **({"guidance_scale": guidance_scale} if arguments is None else arguments),
    )


def warm_up(
    pipe: Any,
    shapes: Iterable[ServedShape],
    *,
    steps: int = WARM_UP_STEPS,
    guidance_scale: float = 7.5,
    prompt: str = "warm-up",
    arguments: Mapping[str, Any] | None = None,
) -> list[tuple[ServedShape, float]]:
    """Run each shape once so compilation and CUDA-graph capture happen now, not in a request.

    Three steps suffice: compilation depends on shapes, not on the step count, and CUDA graph
    trees record on the second call and replay from the third. Guidance must be on (> 1) as in
    served requests, since it doubles the UNet's batch. Call it on the thread that will run the
    batches: torch keeps CUDA graph trees per thread, so graphs captured elsewhere are not reused.
    Returns the seconds each shape took.
    """
    import torch._dynamo

    shapes = list(shapes)
    # Each batch size is one more compiled graph of the same code; dynamo gives up (and runs
    # eagerly) past its recompile limit, so make room for every served shape.
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, len(shapes) + 2)
    timings = []
    for shape in shapes:
        started = time.perf_counter()
        run_shape(pipe, shape, steps=steps, guidance_scale=guidance_scale, prompt=prompt, arguments=arguments)
        if pipe.device.type == "cuda":
            torch.cuda.synchronize(pipe.device)
        elapsed = time.perf_counter() - started
        logger.info("warmed up batch %d at %dx%d in %.1f s", shape.batch, shape.width, shape.height, elapsed)
        timings.append((shape, elapsed))
    return timings
