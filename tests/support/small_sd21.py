"""A narrow copy of the SD 2.1-base benchmark spec: the same blocks and options, few channels.

It keeps what the speed steps act on (linear-projection transformers with self- and cross-attention,
several heads per block, a VAE with mid-block attention) at a size that runs in a test.
"""

from __future__ import annotations

import dataclasses

from app.models.random_pipeline import PipelineSpec
from app.models.sd21_base import SD21_BASE

SMALL_SD21: PipelineSpec = dataclasses.replace(
    SD21_BASE,
    name="test-small-sd21-v1",
    description="SD 2.1-base blocks with few channels (tests only)",
    unet={
        **SD21_BASE.unet,
        "sample_size": 8,
        "block_out_channels": (32, 64, 64, 64),
        "attention_head_dim": (2, 4, 4, 4),
        "cross_attention_dim": 64,
        "layers_per_block": 1,
        "norm_num_groups": 16,
    },
    vae={
        **SD21_BASE.vae,
        "sample_size": 64,
        "block_out_channels": (16, 16, 32, 32),
        "layers_per_block": 1,
        "norm_num_groups": 16,
    },
    text_encoder={
        **SD21_BASE.text_encoder,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "projection_dim": 32,
    },
)
