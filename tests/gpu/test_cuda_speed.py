"""On a GPU: the optimized pipeline's images stay within tolerance, and warm-up covers served shapes.

These run only where `torch.cuda.is_available()`; everywhere else they are skipped. They use the
narrow SD 2.1-base copy, yet compiling is still slow: on an H100 the max-autotune case did not finish in
280 s (docs/benchmarks.md), so give this file a generous timeout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from app.backends.cuda_tuning import IMAGE_TOLERANCE_MEAN_ABS, apply_speed_settings, served_shapes, warm_up
from app.models.random_pipeline import materialize
from app.settings import load_settings
from tests.support.small_sd21 import SMALL_SD21

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SIZE = 64


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return materialize(SMALL_SD21, tmp_path_factory.mktemp("models"))


@pytest.fixture(autouse=True)
def fresh_compiler() -> None:
    torch._dynamo.reset()  # no compiled graph carries over from another test


def _load(model_dir: Path, dtype: torch.dtype):
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(model_dir, dtype=dtype).to("cuda")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _images(pipe, batch: int = 2, steps: int = 10, seed: int = 3) -> np.ndarray:
    return pipe(
        ["a lighthouse at dusk"] * batch,
        height=SIZE,
        width=SIZE,
        num_inference_steps=steps,
        generator=torch.Generator("cuda").manual_seed(seed),
        output_type="np",
    ).images


@pytest.mark.parametrize("mode", ["max-autotune-no-cudagraphs", "reduce-overhead"])
def test_optimized_images_stay_within_tolerance_of_eager(model_dir, mode):
    eager_settings = load_settings(cuda_fuse_qkv=False, cuda_channels_last=False, cuda_compile="off")
    eager = _images(apply_speed_settings(_load(model_dir, torch.bfloat16), eager_settings))

    settings = load_settings(cuda_compile=mode)  # bf16, SDPA, fused QKV, channels-last, compiled
    pipe = apply_speed_settings(_load(model_dir, torch.bfloat16), settings)
    warm_up(pipe, served_shapes(load_settings(max_batch_size=2), SIZE, SIZE))
    optimized = _images(pipe)

    assert eager.std() > 0.01  # a flat image would match anything
    assert float(np.abs(optimized - eager).mean()) <= IMAGE_TOLERANCE_MEAN_ABS


def test_bf16_eager_stays_within_tolerance_of_the_fp16_baseline(model_dir):
    baseline = _images(
        apply_speed_settings(_load(model_dir, torch.float16), load_settings(cuda_dtype="fp16", cuda_compile="off"))
    )
    bf16 = _images(apply_speed_settings(_load(model_dir, torch.bfloat16), load_settings(cuda_compile="off")))
    assert float(np.abs(bf16 - baseline).mean()) <= IMAGE_TOLERANCE_MEAN_ABS


def test_warm_up_compiles_every_served_shape_so_requests_do_not(model_dir):
    from torch._dynamo.utils import counters

    settings = load_settings(cuda_compile="default", max_batch_size=3)
    pipe = apply_speed_settings(_load(model_dir, torch.bfloat16), settings)
    shapes = served_shapes(settings, SIZE, SIZE)
    warm_up(pipe, shapes)
    graphs_after_warm_up = counters["stats"]["unique_graphs"]
    assert graphs_after_warm_up > 0  # something was compiled

    with torch._dynamo.config.patch(error_on_recompile=True):
        for shape in shapes:  # a served request: other prompt, seed and step count
            _images(pipe, batch=shape.batch, steps=5, seed=11)
    assert counters["stats"]["unique_graphs"] == graphs_after_warm_up
