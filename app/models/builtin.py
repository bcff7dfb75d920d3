"""The built-in demo model: a tiny Stable Diffusion pipeline with random weights.

It has the real pipeline's structure (CLIP text encoder, UNet with cross-attention, VAE with an
8x latent scale) at a size that runs in well under a second per image on a laptop CPU. Its images
are abstract colour fields, not pictures: it exists to run the whole service offline.
"""

from __future__ import annotations

from app.models.random_pipeline import PipelineSpec

BUILTIN_PREFIX = "builtin:"

TINY = PipelineSpec(
    name="builtin-tiny-v2",  # v2: a tokenizer with the whole vocabulary (v1 ignored the prompt)
    description="tiny random-weight Stable Diffusion (demo: abstract images, no download)",
    unet={
        "sample_size": 32,  # 32 latent pixels x 8 = 256 x 256 images by default
        "in_channels": 4,
        "out_channels": 4,
        "block_out_channels": (32, 64),
        "layers_per_block": 1,
        "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
        "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"),
        "cross_attention_dim": 32,
        "attention_head_dim": 8,
        "norm_num_groups": 32,
    },
    vae={
        "sample_size": 256,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 4,
        # Four blocks give Stable Diffusion's 8x latent scale.
        "block_out_channels": (32, 32, 32, 32),
        "down_block_types": ("DownEncoderBlock2D",) * 4,
        "up_block_types": ("UpDecoderBlock2D",) * 4,
        "layers_per_block": 1,
        "norm_num_groups": 32,
    },
    text_encoder={
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 77,
        "projection_dim": 32,
    },
)

BUILTIN_MODELS: dict[str, PipelineSpec] = {"tiny": TINY}


def builtin_spec(model_id: str) -> PipelineSpec:
    """The spec for a `builtin:<name>` model id, or a ValueError naming the known ones."""
    name = model_id.removeprefix(BUILTIN_PREFIX)
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        known = ", ".join(BUILTIN_PREFIX + n for n in BUILTIN_MODELS)
        raise ValueError(f"unknown built-in model {model_id!r}; known: {known}") from None
