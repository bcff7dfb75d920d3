"""The built-in demo models: one tiny pipeline per family with random weights.

Each has its family's real structure (SD: CLIP text encoder, UNet with cross-attention, VAE with an 8x latent
scale; SDXL: two CLIP encoders and a text_time UNet; Flux: CLIP and T5 encoders, a Flux transformer and a
16-channel VAE; FLUX.2 [klein], Z-Image, Qwen-Image: a Qwen text encoder and the family's transformer and VAE)
at a size that runs in well under a second per image on a laptop CPU. Their images are
abstract colour fields, not pictures: they exist to run the whole service offline.
"""

from __future__ import annotations

from app.models.random_flux import FluxSpec
from app.models.random_flux2 import Flux2KleinSpec
from app.models.random_pipeline import PipelineSpec, RandomModelSpec
from app.models.random_qwen_image import QwenImageSpec
from app.models.random_sdxl import SdxlSpec
from app.models.random_z_image import ZImageSpec

BUILTIN_PREFIX = "builtin:"

# Small enough to leave a laptop's CPU at a fraction of a second per image at the models' default sizes.
_TINY_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "block_out_channels": (32, 32, 32, 32),  # four blocks: the 8x latent scale of every family's VAE
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
    vae={**_TINY_VAE, "sample_size": 256, "latent_channels": 4},
    text_encoder=_TINY_CLIP,
)

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

# The 2026 families' Qwen text encoders at toy width; at 512 prompt tokens (the families' length) they dominate
# the tiny models' time, so they stay narrow.
_TINY_QWEN3 = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 1024,
}

TINY_FLUX2_KLEIN = Flux2KleinSpec(
    name="builtin-tiny-flux2-klein-v1",
    description="tiny random-weight FLUX.2 [klein] (demo: abstract images, no download)",
    transformer={
        "patch_size": 1,
        "num_layers": 1,
        "num_single_layers": 2,
        "attention_head_dim": 16,
        "num_attention_heads": 2,
        "axes_dims_rope": (4, 4, 4, 4),  # sums to attention_head_dim
        "guidance_embeds": False,  # [klein] 4B is distilled
    },
    vae={**_TINY_VAE, "sample_size": 256, "latent_channels": 16, "use_quant_conv": False, "use_post_quant_conv": False},
    # 28 layers: the pipeline stacks the hidden states of layers 9, 18 and 27 by default.
    text_encoder={**_TINY_QWEN3, "num_hidden_layers": 28},
)

TINY_Z_IMAGE = ZImageSpec(
    name="builtin-tiny-z-image-v1",
    description="tiny random-weight Z-Image Turbo (demo: abstract images, no download)",
    transformer={
        "all_patch_size": (2,),
        "all_f_patch_size": (1,),
        "dim": 32,
        "n_layers": 2,
        "n_refiner_layers": 1,
        "n_heads": 2,
        "n_kv_heads": 2,
        "axes_dims": (8, 4, 4),  # sums to dim / n_heads
        "axes_lens": (1024, 64, 64),  # positions: prompt tokens, then latent rows and columns
    },
    vae={
        **_TINY_VAE,
        "sample_size": 256,
        "latent_channels": 16,
        "scaling_factor": 0.3611,
        "shift_factor": 0.1159,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    text_encoder={**_TINY_QWEN3, "num_hidden_layers": 2},
)

TINY_QWEN_IMAGE = QwenImageSpec(
    name="builtin-tiny-qwen-image-v1",
    description="tiny random-weight Qwen-Image (demo: abstract images, no download)",
    transformer={
        "patch_size": 2,
        "num_layers": 2,
        "attention_head_dim": 16,
        "num_attention_heads": 2,
        "axes_dims_rope": (8, 4, 4),  # sums to attention_head_dim
    },
    # Three temporal-downsample stages: the 8x scale of the real VAE.
    vae={"base_dim": 8, "z_dim": 16, "dim_mult": [1, 1, 1, 1], "num_res_blocks": 1},
    sample_size=128,  # a small default: the causal-3D VAE is the slow part on a CPU
    text_config={
        **{k: v for k, v in _TINY_QWEN3.items() if k != "head_dim"},
        "num_hidden_layers": 2,
        "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
    },
    vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16},
)

BUILTIN_MODELS: dict[str, RandomModelSpec] = {
    "tiny": TINY,
    "tiny-sdxl": TINY_SDXL,
    "tiny-flux": TINY_FLUX,
    "tiny-flux2-klein": TINY_FLUX2_KLEIN,
    "tiny-z-image": TINY_Z_IMAGE,
    "tiny-qwen-image": TINY_QWEN_IMAGE,
}


def builtin_spec(model_id: str) -> RandomModelSpec:
    """The spec for a `builtin:<name>` model id, or a ValueError naming the known ones."""
    name = model_id.removeprefix(BUILTIN_PREFIX)
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        known = ", ".join(BUILTIN_PREFIX + n for n in BUILTIN_MODELS)
        raise ValueError(f"unknown built-in model {model_id!r}; known: {known}") from None
