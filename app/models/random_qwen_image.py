"""A Qwen-Image pipeline of a given architecture with random weights, built offline.

The real structure at toy width (diffusers 0.42.1 `QwenImagePipeline`): a Qwen2.5-VL model whose last hidden
states are the prompt features (the transformer's `joint_attention_dim` is its text width), a
QwenImageTransformer2DModel over 2x2-packed latents (`in_channels` 4x the VAE's `z_dim`), the causal-3D
AutoencoderKLQwenImage (8x: three temporal-downsample stages) and the flow-matching Euler scheduler.

Qwen-Image's VAE config states no pixel size, so a model of this family is served at the family's 1328 px;
the tiny one records its own `sample_size` in vae/config.json, which the backend reads instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.qwen_tokenizer_files import END_OF_TEXT_ID, VOCAB_SIZE, build_qwen_tokenizer

PACKED_PATCH = 2  # the 2x2 latent patches the pipeline packs into one token


@dataclass(frozen=True)
class QwenImageSpec:
    """The architecture of a Qwen-Image pipeline: configs of the transformer, the VAE and the text encoder."""

    name: str  # also the cache folder name: bump it when the architecture changes
    transformer: Mapping[str, Any]  # without in_channels / out_channels / joint_attention_dim (derived)
    vae: Mapping[str, Any]  # AutoencoderKLQwenImage fields
    sample_size: int  # the pixel side the model is served at by default (recorded in vae/config.json)
    text_config: Mapping[str, Any]  # the Qwen2.5-VL text model's fields, except the vocabulary
    vision_config: Mapping[str, Any]  # its (unused) vision tower's fields
    seed: int = 0
    description: str = ""
    family: str = "qwen-image"

    def build(self, tokenizer_dir: Path) -> Any:  # a diffusers QwenImagePipeline (imported lazily)
        """The pipeline with seeded random weights and our own Qwen tokenizer."""
        import torch
        from diffusers import (
            AutoencoderKLQwenImage,
            FlowMatchEulerDiscreteScheduler,
            QwenImagePipeline,
            QwenImageTransformer2DModel,
        )
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        tokenizer = build_qwen_tokenizer(tokenizer_dir)
        z_dim = int(self.vae["z_dim"])
        special_ids = {"bos_token_id": END_OF_TEXT_ID, "eos_token_id": END_OF_TEXT_ID, "pad_token_id": END_OF_TEXT_ID}
        width = int(self.text_config["hidden_size"])
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(self.seed)
            transformer = QwenImageTransformer2DModel(
                **self.transformer,
                in_channels=z_dim * PACKED_PATCH * PACKED_PATCH,
                out_channels=z_dim,
                joint_attention_dim=width,
            )
            vae = AutoencoderKLQwenImage(**self.vae, latents_mean=[0.0] * z_dim, latents_std=[1.0] * z_dim)
            vae.register_to_config(sample_size=self.sample_size)
            # The vision tower never runs for text prompts; its special token ids only need to be valid ids.
            text_encoder = Qwen2_5_VLForConditionalGeneration(
                Qwen2_5_VLConfig(
                    # Qwen2.5-VL's default special ids are past this vocabulary's end.
                    text_config={**self.text_config, "vocab_size": VOCAB_SIZE, **special_ids},
                    vision_config=dict(self.vision_config),
                    hidden_size=width,
                    vocab_size=VOCAB_SIZE,
                    vision_start_token_id=0,
                    vision_end_token_id=0,
                    vision_token_id=0,
                    image_token_id=0,
                    video_token_id=0,
                )
            )
        finally:
            torch.random.set_rng_state(generator_state)
        return QwenImagePipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(),
            vae=vae.eval(),
            text_encoder=text_encoder.eval(),
            tokenizer=tokenizer,
            transformer=transformer.eval(),
        )
