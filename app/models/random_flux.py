"""A FLUX.1 pipeline of a given architecture with random weights, built offline.

The real Flux structure at toy width: a CLIP text encoder (its pooled output feeds the transformer's
`pooled_projection_dim`), a T5 encoder (its hidden states are the transformer's `joint_attention_dim`
context), a FluxTransformer2DModel over 2x2-packed latents (so `in_channels` is 4x the VAE's latent channels),
an AutoencoderKL with 16 latent channels, and the flow-matching Euler scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.models.t5_tokenizer_files import build_t5_tokenizer, pieces
from app.models.tokenizer_files import load_tokenizer, write_tokenizer_files

# black-forest-labs/FLUX.1-schnell scheduler/scheduler_config.json: FlowMatchEulerDiscreteScheduler with a fixed
# shift of 1.0 and no resolution-dependent shifting (as quoted in public repositories; FLUX.1-dev shifts).
SCHNELL_SCHEDULER: Mapping[str, Any] = {"num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": False}

PACKED_PATCH = 2  # FluxPipeline._pack_latents folds 2x2 latent pixels into one token


@dataclass(frozen=True)
class FluxSpec:
    """The architecture of a Flux pipeline: configs of the transformer, the VAE and both text encoders."""

    name: str  # also the cache folder name: bump it when the architecture changes
    transformer: Mapping[str, Any]  # without in_channels / joint_attention_dim / pooled_projection_dim (derived)
    vae: Mapping[str, Any]
    text_encoder: Mapping[str, Any]  # CLIPTextConfig fields, except vocabulary and special token ids
    text_encoder_2: Mapping[str, Any]  # T5Config fields, except vocabulary and special token ids
    max_sequence_length: int  # the T5 tokenizer's length (schnell: 256)
    scheduler: Mapping[str, Any] = field(default_factory=lambda: dict(SCHNELL_SCHEDULER))
    seed: int = 0
    description: str = ""
    family: str = "flux"

    def transformer_config(self) -> dict[str, Any]:
        """The transformer config with the widths that follow from the VAE and the text encoders."""
        return {
            **self.transformer,
            "in_channels": int(self.vae["latent_channels"]) * PACKED_PATCH * PACKED_PATCH,
            "joint_attention_dim": int(self.text_encoder_2["d_model"]),
            "pooled_projection_dim": int(self.text_encoder["hidden_size"]),
        }

    def build(self, tokenizer_dir: Path) -> Any:  # a diffusers FluxPipeline (imported lazily)
        """The pipeline with seeded random weights; the tokenizers are our own CLIP files and T5 pieces."""
        import torch
        from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
        from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

        token_ids = write_tokenizer_files(tokenizer_dir)
        tokenizer = load_tokenizer(tokenizer_dir, int(self.text_encoder.get("max_position_embeddings", 77)))
        tokenizer_2 = build_t5_tokenizer(self.max_sequence_length)
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(self.seed)
            transformer = FluxTransformer2DModel(**self.transformer_config())
            vae = AutoencoderKL(**self.vae)
            text_encoder = CLIPTextModel(
                CLIPTextConfig(**self.text_encoder, pad_token_id=token_ids["eos_token_id"], **token_ids)
            )
            text_encoder_2 = T5EncoderModel(
                T5Config(
                    **self.text_encoder_2,
                    vocab_size=len(pieces()),
                    pad_token_id=0,
                    eos_token_id=1,
                    decoder_start_token_id=0,
                )
            )
        finally:
            torch.random.set_rng_state(generator_state)
        return FluxPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(**self.scheduler),
            vae=vae.eval(),
            text_encoder=text_encoder.eval(),
            tokenizer=tokenizer,
            text_encoder_2=text_encoder_2.eval(),
            tokenizer_2=tokenizer_2,
            transformer=transformer.eval(),
        )
