"""A Stable Diffusion XL pipeline of a given architecture with random weights, built offline.

The real SDXL structure at toy width: two CLIP text encoders (the second with a text projection, whose pooled
output feeds the UNet's `text_time` added embedding together with the six size/crop conditioning numbers), a
UNet whose cross-attention width is both encoders' hidden sizes together, and an 8x VAE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.models.tokenizer_files import load_tokenizer, write_tokenizer_files

# stabilityai/stable-diffusion-xl-base-1.0 scheduler/scheduler_config.json: EulerDiscreteScheduler on SD's
# schedule with "leading" spacing (as quoted in public repositories; the betas are SD's, see random_pipeline).
SDXL_SCHEDULER: Mapping[str, Any] = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "interpolation_type": "linear",
    "prediction_type": "epsilon",
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "use_karras_sigmas": False,
}

# SDXL conditions on (original size, crop top-left, target size): six numbers, each embedded with
# `addition_time_embed_dim` channels (StableDiffusionXLPipeline._get_add_time_ids).
TIME_IDS = 6


@dataclass(frozen=True)
class SdxlSpec:
    """The architecture of an SDXL pipeline: configs of the UNet, the VAE and both CLIP text encoders."""

    name: str  # also the cache folder name: bump it when the architecture changes
    unet: Mapping[str, Any]  # without cross_attention_dim / projection_class_embeddings_input_dim (derived)
    vae: Mapping[str, Any]
    text_encoder: Mapping[str, Any]  # CLIPTextConfig fields, except vocabulary and special token ids
    text_encoder_2: Mapping[str, Any]  # CLIPTextConfig fields of the CLIPTextModelWithProjection
    scheduler: Mapping[str, Any] = field(default_factory=lambda: dict(SDXL_SCHEDULER))
    seed: int = 0
    description: str = ""
    family: str = "sdxl"

    def unet_config(self) -> dict[str, Any]:
        """The UNet config with the two widths that follow from the text encoders."""
        time_dim = int(self.unet["addition_time_embed_dim"])
        return {
            **self.unet,
            "addition_embed_type": "text_time",
            "cross_attention_dim": int(self.text_encoder["hidden_size"]) + int(self.text_encoder_2["hidden_size"]),
            "projection_class_embeddings_input_dim": TIME_IDS * time_dim + int(self.text_encoder_2["projection_dim"]),
        }

    def build(self, tokenizer_dir: Path) -> Any:  # a diffusers StableDiffusionXLPipeline (imported lazily)
        """The pipeline with seeded random weights; both tokenizers are our own CLIP files."""
        import torch
        from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
        from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

        token_ids = write_tokenizer_files(tokenizer_dir)
        special = {**token_ids, "pad_token_id": token_ids["eos_token_id"]}
        tokenizer = load_tokenizer(tokenizer_dir, int(self.text_encoder.get("max_position_embeddings", 77)))
        tokenizer_2 = load_tokenizer(tokenizer_dir, int(self.text_encoder_2.get("max_position_embeddings", 77)))
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(self.seed)
            unet = UNet2DConditionModel(**self.unet_config())
            vae = AutoencoderKL(**self.vae)
            text_encoder = CLIPTextModel(CLIPTextConfig(**self.text_encoder, **special))
            text_encoder_2 = CLIPTextModelWithProjection(CLIPTextConfig(**self.text_encoder_2, **special))
        finally:
            torch.random.set_rng_state(generator_state)
        return StableDiffusionXLPipeline(
            vae=vae.eval(),
            text_encoder=text_encoder.eval(),
            text_encoder_2=text_encoder_2.eval(),
            tokenizer=tokenizer,
            tokenizer_2=tokenizer_2,
            unet=unet.eval(),
            scheduler=EulerDiscreteScheduler(**self.scheduler),
        )
