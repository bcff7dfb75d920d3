"""The step cache (CUDA_STEP_CACHE) on the CPU with the tiny built-ins: fewer block passes for the same steps, an
image within its tolerance of the uncached one, nothing changed when off, and a logged skip where a family has none.

The tiny models' random weights change the first block's residual by 0.17 to 0.67 between steps, far above the
default threshold (0.05), so these tests use 0.5, where the cache skips most steps' remaining blocks.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from PIL import Image

from app.backends.base import family_arguments
from app.backends.cpu import load_cpu_backend
from app.backends.cuda_tuning import apply_speed_settings, plan_speed_settings
from app.backends.diffusers_backend import denoiser, load_diffusers_pipeline, native_side
from app.backends.step_cache import STEP_CACHE_IMAGE_TOLERANCE_MEAN_ABS, denoiser_class_of, unsupported_reason
from app.models.builtin import builtin_spec
from app.models.random_pipeline import materialize
from app.settings import load_settings
from tests.app.live_server import serve
from tests.support.family_folders import FAMILY_SETTINGS

THRESHOLD = 0.5
CACHED = ["builtin:tiny-flux", "builtin:tiny-qwen-image"]
UNCACHED = ["builtin:tiny", "builtin:tiny-sdxl", "builtin:tiny-flux2-klein", "builtin:tiny-z-image"]
# Only the step cache differs from the pipeline as loaded: the other speed steps are tested in test_cuda_tuning.py.
ONLY_THE_CACHE = {"cuda_fuse_qkv": False, "cuda_channels_last": False, "cuda_compile": "off"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def _pipeline(model: str, cache_dir: Path) -> tuple[Any, Any]:
    return load_diffusers_pipeline(materialize(builtin_spec(model), cache_dir))


class BlockPasses:
    """Counts the passes through the denoiser's last block: its first layer runs only when the block computes.

    A forward hook on the block itself would count skipped passes too: the cache's hook replaces the block's
    forward, and a skipped block still returns (its input).
    """

    def __init__(self, net: Any):
        blocks = [m for name, m in net.named_children() if name in ("transformer_blocks", "single_transformer_blocks")]
        layer = next(iter(blocks[-1][-1].children()))
        self.count = 0
        layer.register_forward_hook(self._count)

    def _count(self, *_: object) -> None:
        self.count += 1


def _image(pipe: Any, family: Any, seed: int = 7) -> np.ndarray:
    side = native_side(pipe, family)
    return pipe(
        prompt=["a lighthouse at dusk"],
        height=side,
        width=side,
        num_inference_steps=family.default_steps,
        generator=torch.Generator().manual_seed(seed),
        output_type="np",
        **family_arguments(family, None),
    ).images


def test_plan_skips_the_cache_when_off_compiled_or_unsupported() -> None:
    def skipped(denoiser_class: str | None = None, **overrides: object) -> str | None:
        steps = plan_speed_settings(load_settings(**overrides), "cuda", denoiser_class)
        return next(s for s in steps if s.name == "step_cache").skipped

    assert skipped("FluxTransformer2DModel") == "CUDA_STEP_CACHE off"  # off by default
    assert skipped("FluxTransformer2DModel", cuda_step_cache=True) is None
    assert "graph break" in str(skipped("FluxTransformer2DModel", cuda_step_cache=True, cuda_compile="default"))
    assert "UNet" in str(skipped("UNet2DConditionModel", cuda_step_cache=True))
    assert skipped(None, cuda_step_cache=True) is None  # class unknown: planned, decided when applied
    assert denoiser_class_of({"unet": ["diffusers", "UNet2DConditionModel"]}) == "UNet2DConditionModel"
    assert denoiser_class_of({"transformer": ["diffusers", "QwenImageTransformer2DModel"]}).startswith("QwenImage")
    assert unsupported_reason("SomeNewTransformer") is not None  # unchecked classes are not cached blindly


def test_a_threshold_out_of_range_is_refused_naming_the_variable() -> None:
    from common.settings import SettingsError

    with pytest.raises(SettingsError, match="CUDA_STEP_CACHE_THRESHOLD"):
        load_settings(cuda_step_cache_threshold=0)


@pytest.mark.parametrize("model", CACHED)
def test_the_cache_runs_fewer_block_passes_and_keeps_the_image_within_tolerance(
    model: str, cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pipe, family = _pipeline(model, cache_dir)
    passes = BlockPasses(denoiser(pipe))
    uncached = _image(pipe, family)
    uncached_passes, passes.count = passes.count, 0

    with caplog.at_level(logging.INFO):
        settings = load_settings(cuda_step_cache=True, cuda_step_cache_threshold=THRESHOLD, **ONLY_THE_CACHE)
        apply_speed_settings(pipe, settings)
    assert f"speed step step_cache: first-block {THRESHOLD:g}" in caplog.text
    cached = _image(pipe, family)

    assert uncached_passes == family.default_steps  # one pass per step (no guidance batch split on either)
    assert passes.count < uncached_passes
    assert uncached.std() > 0.01  # a flat image would match anything
    distance = float(np.abs(cached - uncached).mean())
    print(f"{model}: {passes.count}/{uncached_passes} block passes, mean abs {distance:.4f}")
    assert distance <= STEP_CACHE_IMAGE_TOLERANCE_MEAN_ABS


@pytest.mark.parametrize("model", UNCACHED)
def test_a_family_without_a_step_cache_logs_the_skip_and_still_draws(
    model: str, cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(
        model_id=model, model_cache_dir=cache_dir, backend="cpu", cuda_step_cache=True, cuda_step_cache_threshold=0.5
    )
    with caplog.at_level(logging.INFO):
        backend = load_cpu_backend(settings)
    net = denoiser(backend.pipeline)
    assert f"speed step step_cache (first-block 0.5) skipped: {unsupported_reason(type(net).__name__)}" in caplog.text
    assert not getattr(net, "is_cache_enabled", False)
    backend.warm_up(2, backend.native_size)  # one image drawn at two steps


def test_off_by_default_the_cpu_backend_adds_no_cache(cache_dir: Path) -> None:
    backend = load_cpu_backend(load_settings(model_id="builtin:tiny-flux", model_cache_dir=cache_dir, backend="cpu"))
    assert not denoiser(backend.pipeline).is_cache_enabled


@pytest.fixture(scope="module")
def flux_servers(cache_dir: Path) -> Iterator[tuple[Any, Any]]:
    common = {**FAMILY_SETTINGS, "model_id": "builtin:tiny-flux", "cuda_step_cache_threshold": THRESHOLD}
    with serve(cache_dir, **common) as plain, serve(cache_dir, cuda_step_cache=True, **common) as cached:
        yield plain, cached


def _generate(url: str) -> np.ndarray:
    body = {"prompt": "a lighthouse at dusk", "seed": 11, "steps": 4, "width": 128, "height": 128}
    response = httpx.post(f"{url}/v1/generate", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"), dtype=np.float32) / 255


def test_through_the_service_the_cache_skips_blocks_and_the_image_stays_within_tolerance(flux_servers) -> None:
    plain, cached = flux_servers
    plain_passes = BlockPasses(denoiser(plain.service.backend.pipeline))
    cached_passes = BlockPasses(denoiser(cached.service.backend.pipeline))
    assert denoiser(cached.service.backend.pipeline).is_cache_enabled
    assert not denoiser(plain.service.backend.pipeline).is_cache_enabled

    reference, image = _generate(plain.url), _generate(cached.url)
    assert plain_passes.count == 4
    assert cached_passes.count < plain_passes.count
    assert reference.std() > 0.01
    assert float(np.abs(image - reference).mean()) <= STEP_CACHE_IMAGE_TOLERANCE_MEAN_ABS
