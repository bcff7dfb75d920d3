"""The step cache: diffusers' first-block cache on the denoiser, where the family's denoiser can take it.

The first-block cache (diffusers 0.42.1, `diffusers.hooks.FirstBlockCacheConfig`, turned on with the model's
`enable_cache`) runs the transformer's first block at every step and compares its residual with the previous
step's: when the relative mean absolute change is below `CUDA_STEP_CACHE_THRESHOLD`, the remaining blocks are
skipped and the residual they added last time is added instead. It is plain torch (hooks on the blocks), so it
runs on the CPU as on a GPU. It trades a small image change for speed, hence its own tolerance below.

Which served denoiser takes it was read in diffusers 0.42.1 (`models/cache_utils.py`, `hooks/_helpers.py`, the
pipelines' `cache_context` calls) and tried on the tiny built-ins (tests/app/test_step_cache.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

# How far a step-cached image may be from the same pipeline's uncached one at the same seed: mean absolute
# difference of pixels scaled to 0..1. Measured on the CPU with the tiny built-ins at their default steps
# (docs/benchmarks.md): at most 0.0020 (FLUX.1-schnell, three of four steps' blocks skipped) and 0.0003
# (Qwen-Image, 45 of 50 skipped). Their random blocks move the image little, so 5x that leaves room for other
# prompts and seeds; trained weights move more per block, and a GPU run with real weights is still to be made.
STEP_CACHE_IMAGE_TOLERANCE_MEAN_ABS = 0.01

# The denoisers whose pipelines set a cache context per denoiser call and whose blocks diffusers registers.
FIRST_BLOCK_CACHED = frozenset({"FluxTransformer2DModel", "QwenImageTransformer2DModel"})

# Why each other served denoiser has no step cache (diffusers 0.42.1).
NO_STEP_CACHE: Mapping[str, str] = {
    "UNet2DConditionModel": "diffusers has no step cache for a UNet (enable_cache is on transformer models only)",
    "Flux2Transformer2DModel": "diffusers 0.42.1's first-block cache fails on it: its single blocks return one "
    "tensor where its double blocks return two (TypeError at the last block)",
    "ZImageTransformer2DModel": "diffusers 0.42.1 gives it no enable_cache, and ZImagePipeline sets no cache context",
}


def unsupported_reason(denoiser_class: str) -> str | None:
    """Why a denoiser of class `denoiser_class` cannot take the step cache, or None when it can."""
    if denoiser_class in FIRST_BLOCK_CACHED:
        return None
    return NO_STEP_CACHE.get(denoiser_class, f"{denoiser_class} is not one the first-block cache was checked on")


def denoiser_class_of(model_index: Mapping[str, Any]) -> str:
    """The denoiser's class named in a diffusers folder's model_index.json: the UNet's, else the transformer's."""
    entry = model_index.get("unet") or model_index.get("transformer")
    if not isinstance(entry, list | tuple) or len(entry) != 2:
        raise ValueError("model_index.json names neither a unet nor a transformer")
    return str(entry[1])


def enable_step_cache(net: Any, threshold: float) -> None:
    """Turn the first-block cache on for the denoiser `net`, which must be one `unsupported_reason` accepts."""
    from diffusers.hooks import FirstBlockCacheConfig

    net.enable_cache(FirstBlockCacheConfig(threshold=threshold))


def apply_step_cache(net: Any, threshold: float) -> bool:
    """Turn the step cache on for `net` when it can take it, else log why not; return whether it is on.

    The CPU backend's one speed step (cuda_tuning's other steps are for a GPU); the CUDA backend plans it with them.
    """
    reason = unsupported_reason(type(net).__name__)
    if reason is not None:
        logger.info("speed step step_cache (first-block %g) skipped: %s", threshold, reason)
        return False
    enable_step_cache(net, threshold)
    logger.info("speed step step_cache: first-block %g", threshold)
    return True
