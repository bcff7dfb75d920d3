"""Build a diffusers pipeline of a given architecture with random weights, offline.

A spec (`PipelineSpec` here for Stable Diffusion 1.x/2.x; `random_sdxl.SdxlSpec`, `random_flux.FluxSpec`)
holds the component configs (the same keys as a diffusers model folder's
config.json files). `materialize()` builds the pipeline once, saves it in diffusers layout under a
cache directory and returns that directory, so the service loads it back through the normal
diffusers loader, exactly as it loads real weights. Weights come from a fixed seed, so the same
spec always gives the same model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from app.models.t5_tokenizer_files import name_portable_t5_tokenizer
from app.models.tokenizer_files import load_tokenizer, write_tokenizer_files

# Stable Diffusion's noise schedule (the same for 1.x and 2.x base models).
SD_SCHEDULER: Mapping[str, Any] = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "clip_sample": False,
    "set_alpha_to_one": False,
    "steps_offset": 1,
}


class RandomModelSpec(Protocol):
    """What `materialize` needs of a spec: a cache name and a way to build the pipeline in memory."""

    @property
    def name(self) -> str:
        """The cache folder name: bumped when the architecture changes."""
        ...

    @property
    def family(self) -> str:
        """The family name (app.models.families) the built pipeline belongs to."""
        ...

    @property
    def description(self) -> str:
        """What the model is, for people (the UI says it is a demo model)."""
        ...

    def build(self, tokenizer_dir: Path) -> Any:
        """The pipeline with seeded random weights; CLIP tokenizer files are written under `tokenizer_dir`."""
        ...


@dataclass(frozen=True)
class PipelineSpec:
    """The architecture of a Stable Diffusion 1.x/2.x pipeline: one config per component."""

    name: str  # also the cache folder name: bump it when the architecture changes
    unet: Mapping[str, Any]
    vae: Mapping[str, Any]
    text_encoder: Mapping[str, Any]  # CLIPTextConfig fields, except vocabulary and special token ids
    scheduler: Mapping[str, Any] = field(default_factory=lambda: dict(SD_SCHEDULER))
    seed: int = 0
    description: str = ""
    family: str = "sd"

    def build(self, tokenizer_dir: Path) -> Any:
        """The StableDiffusionPipeline with seeded random weights (see build_pipeline)."""
        return build_pipeline(self, tokenizer_dir)


def build_pipeline(
    spec: PipelineSpec, tokenizer_dir: Path
) -> Any:  # a diffusers StableDiffusionPipeline (imported lazily)
    """Create the pipeline in memory with seeded random weights and our own tokenizer files."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    token_ids = write_tokenizer_files(tokenizer_dir)
    tokenizer = load_tokenizer(tokenizer_dir, int(spec.text_encoder.get("max_position_embeddings", 77)))
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(spec.seed)
        unet = UNet2DConditionModel(**spec.unet)
        vae = AutoencoderKL(**spec.vae)
        text_encoder = CLIPTextModel(
            CLIPTextConfig(**spec.text_encoder, pad_token_id=token_ids["eos_token_id"], **token_ids)
        )
    finally:
        torch.random.set_rng_state(generator_state)
    return StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=DDIMScheduler(**spec.scheduler),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )


def copy_clip_tokenizer_files(tokenizer_dir: Path, model_dir: Path) -> None:
    """Put vocab.json/merges.txt beside each saved CLIP tokenizer of `model_dir`.

    transformers 5 saves only tokenizer.json; older releases (the Deep Learning Containers) need the pair.
    """
    for name in ("tokenizer", "tokenizer_2"):
        config = model_dir / name / "tokenizer_config.json"
        if config.is_file() and "CLIPTokenizer" in config.read_text(encoding="utf-8"):
            for file in ("vocab.json", "merges.txt"):
                shutil.copy2(tokenizer_dir / file, model_dir / name / file)


def materialize(spec: RandomModelSpec, cache_dir: Path) -> Path:
    """Return a diffusers folder holding `spec`'s pipeline, building and saving it on first use.

    The folder appears atomically (built aside, then renamed), so concurrent starts and an
    interrupted build never leave a half-written model behind.
    """
    target = cache_dir / spec.name
    if (target / "model_index.json").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=cache_dir))
    try:
        pipeline = spec.build(staging / "tokenizer-files")
        pipeline.save_pretrained(staging / "model", safe_serialization=True)
        copy_clip_tokenizer_files(staging / "tokenizer-files", staging / "model")
        name_portable_t5_tokenizer(staging / "model")
        try:
            os.replace(staging / "model", target)
        except OSError:
            if not (target / "model_index.json").is_file():
                raise  # not a lost race with another process: a real failure
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
