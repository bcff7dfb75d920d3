"""Diffusers folders shaped like SDXL base and FLUX.1-schnell, for tests that serve them as MODEL_ID."""

from __future__ import annotations

from pathlib import Path

from app.models.builtin import builtin_spec
from app.models.random_pipeline import materialize

# The tiny SDXL's native side is 128, the tiny Flux's 256: their families' sizes scaled to them fit in 384.
FAMILY_SETTINGS = {"default_steps": None, "default_width": None, "default_height": None, "max_size": 384}


def saved_folder(builtin: str, root: Path) -> Path:
    """A diffusers folder written by save_pretrained from the built-in model `builtin` (e.g. builtin:tiny-flux).

    An ordinary diffusers folder: the service knows nothing of it beyond its model_index.json.
    """
    from diffusers import DiffusionPipeline

    pipeline = DiffusionPipeline.from_pretrained(materialize(builtin_spec(builtin), root / "cache"))
    folder = root / builtin.removeprefix("builtin:")
    pipeline.save_pretrained(folder)
    return folder
