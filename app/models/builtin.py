"""The built-in demo models: one tiny pipeline per family with random weights.

Each has its family's real structure (SD: CLIP text encoder, UNet with cross-attention, VAE with an 8x latent
scale; SDXL: two CLIP encoders and a text_time UNet; Flux: CLIP and T5 encoders, a Flux transformer and a
16-channel VAE) at a size that runs in well under a second per image on a laptop CPU. Their images are
abstract colour fields, not pictures: they exist to run the whole service offline.
"""

from __future__ import annotations

from app.models.random_flux import FluxSpec
from app.models.random_pipeline import PipelineSpec, RandomModelSpec
from app.models.random_sdxl import SdxlSpec

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

# Small enough to leave a laptop's CPU at a fraction of a second per image at the models' default sizes.
_TINY_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "block_out_channels": (32, 32, 32, 32),  # four blocks: the 8x latent scale of SDXL's and Flux's VAEs
    "down_block_types": ("DownEncoderBlock2D",) * 4,
    "up_block_types": ("UpDecoderBlock2D",) * 4,
    "layers_per_block": 1,
    "norm_num_groups": 32,
}

_TINY_CLIP = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 77,
    "projection_dim": 32,
}

TINY_SDXL = SdxlSpec(
    name="builtin-tiny-sdxl-v1",
    description="tiny random-weight Stable Diffusion XL (demo: abstract images, no download)",
    unet={
        # 16 latent pixels x 8 = 128 x 128 images by default: SDXL's 30 default steps with guidance stay
        # within about half a second per image on a laptop CPU.
        "sample_size": 16,
        "in_channels": 4,
        "out_channels": 4,
        "block_out_channels": (32, 64),
        "layers_per_block": 1,
        "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
        "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"),
        "attention_head_dim": (2, 4),
        "use_linear_projection": True,  # as SDXL base
        "transformer_layers_per_block": (1, 2),  # deeper transformers in lower blocks, as SDXL base
        "addition_time_embed_dim": 8,
        "norm_num_groups": 32,
    },
    vae={**_TINY_VAE, "sample_size": 128, "latent_channels": 4},
    text_encoder=_TINY_CLIP,
    text_encoder_2={**_TINY_CLIP, "hidden_size": 48, "intermediate_size": 96, "projection_dim": 48},
)

TINY_FLUX = FluxSpec(
    name="builtin-tiny-flux-v1",
    description="tiny random-weight FLUX.1-schnell (demo: abstract images, no download)",
    transformer={
        "patch_size": 1,
        "num_layers": 1,
        "num_single_layers": 2,
        "attention_head_dim": 16,
        "num_attention_heads": 2,
        "guidance_embeds": False,  # schnell is guidance-distilled
        "axes_dims_rope": (4, 6, 6),  # sums to attention_head_dim
    },
    # The native size of a Flux folder is its VAE's sample_size (FLUX.1-schnell: 1024).
    vae={
        **_TINY_VAE,
        "sample_size": 256,
        "latent_channels": 16,
        # FLUX.1-schnell vae/config.json's latent normalization and its VAE without quant convs (as quoted
        # in public repositories); FluxPipeline reads both factors when it decodes.
        "scaling_factor": 0.3611,
        "shift_factor": 0.1159,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    text_encoder=_TINY_CLIP,
    text_encoder_2={
        "d_model": 32,
        "d_kv": 8,
        "d_ff": 64,
        "num_layers": 2,
        "num_heads": 4,
        "relative_attention_num_buckets": 8,
        "feed_forward_proj": "gated-gelu",  # T5 v1.1, Flux's encoder
    },
    max_sequence_length=256,
)

BUILTIN_MODELS: dict[str, RandomModelSpec] = {"tiny": TINY, "tiny-sdxl": TINY_SDXL, "tiny-flux": TINY_FLUX}


def builtin_spec(model_id: str) -> RandomModelSpec:
    """The spec for a `builtin:<name>` model id, or a ValueError naming the known ones."""
    name = model_id.removeprefix(BUILTIN_PREFIX)
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        known = ", ".join(BUILTIN_PREFIX + n for n in BUILTIN_MODELS)
        raise ValueError(f"unknown built-in model {model_id!r}; known: {known}") from None
