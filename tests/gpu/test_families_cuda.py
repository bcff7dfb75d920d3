"""On a GPU: every image model family loads through the CUDA backend and draws a batch of the asked size.

These run only where `torch.cuda.is_available()`. They use the tiny built-in model of each family (random
weights, made offline) with the CUDA speed steps on except `torch.compile` (tests/gpu/test_cuda_speed.py covers
compiling), so that a family's pipeline class, dtype, fused QKV and channels-last are exercised on a real device.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from app.backends.base import GenerationParams
from app.backends.cuda import load_cuda_backend
from app.settings import load_settings

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize(
    ("model_id", "family", "guidance"),
    [("builtin:tiny", "sd", 7.5), ("builtin:tiny-sdxl", "sdxl", 5.0), ("builtin:tiny-flux", "flux", None)],
)
def test_each_family_draws_a_batch_on_the_gpu(tmp_path: Path, model_id: str, family: str, guidance: float | None):
    settings = load_settings(model_id=model_id, backend="cuda", model_cache_dir=tmp_path, cuda_compile="off")
    backend = load_cuda_backend(settings)
    assert backend.family.name == family
    assert backend.describe()["gpu"]
    size = 128
    batch = [
        GenerationParams(
            prompt=prompt,
            negative_prompt="",
            steps=4,
            guidance_scale=guidance,
            width=size,
            height=size + 64,
            seed=seed,
        )
        for seed, prompt in enumerate(["a lighthouse at dusk", "a red bicycle"])
    ]
    images = backend.generate(batch)
    assert [image.size for image in images] == [(size, size + 64)] * 2
    pixels = [np.asarray(image, dtype=np.float32) for image in images]
    assert all(np.isfinite(p).all() and p.std() > 0 for p in pixels), "a flat or broken image"
    assert not np.array_equal(pixels[0], pixels[1]), "two seeds and prompts gave the same image"
