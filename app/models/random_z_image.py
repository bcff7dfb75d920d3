"""A Z-Image pipeline of a given architecture with random weights, built offline.

The real structure at toy width (diffusers 0.42.1 `ZImagePipeline`): a Qwen3 model whose second-to-last hidden
states are the prompt features (the transformer's `cap_feat_dim` is the encoder's width), a
ZImageTransformer2DModel over 2x2 patches of a 16-channel AutoencoderKL's latents, and the flow-matching Euler
scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.qwen_tokenizer_files import VOCAB_SIZE, build_qwen_tokenizer


@dataclass(frozen=True)
class ZImageSpec:
    """The architecture of a Z-Image pipeline: configs of the transformer, the VAE and the text encoder."""

    name: str  # also the cache folder name: bump it when the architecture changes
    transformer: Mapping[str, Any]  # without in_channels / cap_feat_dim (derived)
    vae: Mapping[str, Any]
    text_encoder: Mapping[str, Any]  # Qwen3Config fields, except the vocabulary
    seed: int = 0
    description: str = ""
    family: str = "z-image"

    def build(self, tokenizer_dir: Path) -> Any:  # a diffusers ZImagePipeline (imported lazily)
        """The pipeline with seeded random weights and our own Qwen tokenizer."""
        import torch
        from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
        from transformers import Qwen3Config, Qwen3Model

        tokenizer = build_qwen_tokenizer(tokenizer_dir)
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(self.seed)
            transformer = ZImageTransformer2DModel(
                **self.transformer,
                in_channels=int(self.vae["latent_channels"]),
                cap_feat_dim=int(self.text_encoder["hidden_size"]),
            )
            vae = AutoencoderKL(**self.vae)
            text_encoder = Qwen3Model(Qwen3Config(**self.text_encoder, vocab_size=VOCAB_SIZE))
        finally:
            torch.random.set_rng_state(generator_state)
        return ZImagePipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(),
            vae=vae.eval(),
            text_encoder=text_encoder.eval(),
            tokenizer=tokenizer,
            transformer=transformer.eval(),
        )
