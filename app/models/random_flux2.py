"""A FLUX.2 [klein] pipeline of a given architecture with random weights, built offline.

The real structure at toy width (diffusers 0.42.1 `Flux2KleinPipeline`): a Qwen3 causal language model whose
hidden states at three layers (`text_encoder_out_layers`, (9, 18, 27) by default) are stacked into the prompt
embedding, so the transformer's `joint_attention_dim` is three times the encoder's width and the encoder needs
at least 28 layers; a Flux2Transformer2DModel over 2x2-packed latents (`in_channels` is 4x the VAE's latent
channels); AutoencoderKLFlux2; the flow-matching Euler scheduler; `is_distilled` as FLUX.2 [klein] 4B's
model_index.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.qwen_tokenizer_files import VOCAB_SIZE, build_qwen_tokenizer

PACKED_PATCH = 2  # the 2x2 latent patches the pipeline packs into one token
PROMPT_LAYERS = 3  # the encoder layers whose hidden states are stacked (text_encoder_out_layers)


@dataclass(frozen=True)
class Flux2KleinSpec:
    """The architecture of a FLUX.2 [klein] pipeline: configs of the transformer, the VAE and the encoder."""

    name: str  # also the cache folder name: bump it when the architecture changes
    transformer: Mapping[str, Any]  # without in_channels / joint_attention_dim (derived)
    vae: Mapping[str, Any]
    text_encoder: Mapping[str, Any]  # Qwen3Config fields, except the vocabulary
    seed: int = 0
    description: str = ""
    family: str = "flux2-klein"

    def build(self, tokenizer_dir: Path) -> Any:  # a diffusers Flux2KleinPipeline (imported lazily)
        """The pipeline with seeded random weights and our own Qwen tokenizer."""
        import torch
        from diffusers import (
            AutoencoderKLFlux2,
            FlowMatchEulerDiscreteScheduler,
            Flux2KleinPipeline,
            Flux2Transformer2DModel,
        )
        from transformers import Qwen3Config, Qwen3ForCausalLM

        tokenizer = build_qwen_tokenizer(tokenizer_dir)
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(self.seed)
            transformer = Flux2Transformer2DModel(
                **self.transformer,
                in_channels=int(self.vae["latent_channels"]) * PACKED_PATCH * PACKED_PATCH,
                joint_attention_dim=int(self.text_encoder["hidden_size"]) * PROMPT_LAYERS,
            )
            vae = AutoencoderKLFlux2(**self.vae)
            text_encoder = Qwen3ForCausalLM(Qwen3Config(**self.text_encoder, vocab_size=VOCAB_SIZE))
        finally:
            torch.random.set_rng_state(generator_state)
        return Flux2KleinPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(),
            vae=vae.eval(),
            text_encoder=text_encoder.eval(),
            tokenizer=tokenizer,
            transformer=transformer.eval(),
            is_distilled=True,  # as FLUX.2 [klein] 4B: 4 steps, no guidance
        )
