"""The benchmark model: published SD 2.1-base shapes, its FLOPs, and that serving cannot pick it."""

from __future__ import annotations

import pytest
import torch
from diffusers import AutoencoderKL, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel

from app.bench.flops import image_flops
from app.models.builtin import BUILTIN_MODELS, builtin_spec
from app.models.sd21_base import BENCH_MODEL_NAME, SD21_BASE

# Published parameter counts of stabilityai/stable-diffusion-2-1-base's components.
UNET_PARAMETERS = 865_910_724
VAE_PARAMETERS = 83_653_863
TEXT_ENCODER_PARAMETERS = 340_387_840  # with CLIP's 49,408-token vocabulary
CLIP_VOCABULARY = 49_408


def _text_config(vocab_size: int) -> CLIPTextConfig:
    return CLIPTextConfig(
        **SD21_BASE.text_encoder, vocab_size=vocab_size, bos_token_id=0, eos_token_id=1, pad_token_id=1
    )


def _parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_components_have_the_published_parameter_counts():
    # On the meta device nothing is allocated, so the full-size model costs no memory here.
    with torch.device("meta"):
        unet = UNet2DConditionModel(**SD21_BASE.unet)
        vae = AutoencoderKL(**SD21_BASE.vae)
        text_encoder = CLIPTextModel(_text_config(CLIP_VOCABULARY))
    assert _parameters(unet) == UNET_PARAMETERS
    assert _parameters(vae) == VAE_PARAMETERS
    assert _parameters(text_encoder) == TEXT_ENCODER_PARAMETERS


def test_the_published_block_layout():
    unet = SD21_BASE.unet
    assert unet["block_out_channels"] == (320, 640, 1280, 1280)
    assert unet["attention_head_dim"] == (5, 10, 20, 20)
    assert unet["cross_attention_dim"] == SD21_BASE.text_encoder["hidden_size"] == 1024
    assert unet["use_linear_projection"] is True
    assert unet["sample_size"] * 8 == SD21_BASE.vae["sample_size"] == 512
    assert SD21_BASE.text_encoder["num_hidden_layers"] == 23
    assert SD21_BASE.text_encoder["hidden_act"] == "gelu"


def test_our_small_vocabulary_changes_no_flops():
    def text_flops(vocab_size: int) -> float:
        return image_flops(
            SD21_BASE.unet, SD21_BASE.vae, _text_config(vocab_size), height=64, width=64, steps=1
        ).text_encoder

    assert text_flops(514) == text_flops(CLIP_VOCABULARY) > 0


def test_flops_per_image_at_512_and_50_steps_match_the_issue_anchor():
    flops = image_flops(SD21_BASE.unet, SD21_BASE.vae, _text_config(514), height=512, width=512, steps=50)
    assert 80e12 < flops.total < 86e12  # the issue quotes about 83 TFLOP per image
    assert flops.total == pytest.approx(flops.text_encoder + 50 * flops.unet_step + flops.vae_decode)
    assert flops.floor_seconds(790.0) == pytest.approx(flops.total / 790e12)


def test_the_service_cannot_select_the_benchmark_model():
    assert SD21_BASE not in BUILTIN_MODELS.values()
    with pytest.raises(ValueError, match="unknown built-in model"):
        builtin_spec(f"builtin:{BENCH_MODEL_NAME}")
