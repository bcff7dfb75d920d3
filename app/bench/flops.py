"""FLOPs per image, counted from the model's configs rather than quoted from a paper.

The components are rebuilt on PyTorch's meta device (no memory, no weights) and run once under
`torch.utils.flop_counter.FlopCounterMode`, which counts matrix products, convolutions and
attention from shapes alone. Element-wise work (norms, activations, the scheduler) is not counted:
it is a few percent of the total and bound by memory, not arithmetic, so the "FLOP floor" is the
time the counted work takes at the device's peak.

For Stable Diffusion 2.1-base at 512x512 with 50 guided steps this gives about 83 TFLOP per image.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The peak a share of the floor is measured against, in TFLOP/s: the figure the project's targets
# are stated with for H100/H200-class dense bf16 (NVIDIA's H100 SXM sheet lists 989 dense; pass
# --peak-tflops to measure against another device or another reading of its sheet).
DEFAULT_PEAK_TFLOPS = 790.0
TOKENS = 77  # CLIP's fixed prompt length in Stable Diffusion pipelines


@dataclass(frozen=True)
class ImageFlops:
    """FLOPs (multiply-add = 2) spent on one image, by stage."""

    text_encoder: float  # prompt and negative prompt
    unet_step: float  # one denoising step: both halves of classifier-free guidance
    vae_decode: float
    steps: int

    @property
    def total(self) -> float:
        """All counted FLOPs of one image: text encoder, every UNet step and the VAE decode."""
        return self.text_encoder + self.steps * self.unet_step + self.vae_decode

    def floor_seconds(self, peak_tflops: float = DEFAULT_PEAK_TFLOPS) -> float:
        """Seconds one image takes if every counted FLOP ran at `peak_tflops`."""
        return self.total / (peak_tflops * 1e12)


def _count(run: Callable[[], object]) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        run()
    return float(counter.get_total_flops())


def image_flops(
    unet_config: Mapping[str, Any],
    vae_config: Mapping[str, Any],
    text_encoder_config: Any,  # a transformers CLIPTextConfig
    *,
    height: int,
    width: int,
    steps: int,
    guidance: bool = True,
) -> ImageFlops:
    """Count the FLOPs of one image of `height` x `width` with `steps` denoising steps.

    With `guidance` (classifier-free guidance, the pipeline's default), the UNet runs on the
    prompt and the negative prompt at every step, and the text encoder encodes both.
    """
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextModel

    copies = 2 if guidance else 1
    latent_h, latent_w = height // 8, width // 8
    with torch.device("meta"):
        unet = UNet2DConditionModel.from_config(dict(unet_config)).eval()
        vae = AutoencoderKL.from_config(dict(vae_config)).eval()
        text_encoder = CLIPTextModel(text_encoder_config).eval()
        hidden = int(unet.config.cross_attention_dim)
        latent_channels = int(unet.config.in_channels)
        with torch.no_grad():
            unet_step = _count(
                lambda: unet(
                    torch.empty(copies, latent_channels, latent_h, latent_w),
                    torch.tensor(500),
                    encoder_hidden_states=torch.empty(copies, TOKENS, hidden),
                )
            )
            vae_decode = _count(lambda: vae.decode(torch.empty(1, int(vae.config.latent_channels), latent_h, latent_w)))
            text = _count(lambda: text_encoder(torch.zeros(copies, TOKENS, dtype=torch.long)))
    return ImageFlops(text_encoder=text, unet_step=unet_step, vae_decode=vae_decode, steps=steps)


def pipeline_image_flops(pipe: Any, *, height: int, width: int, steps: int, guidance: bool = True) -> ImageFlops:
    """`image_flops` from a loaded diffusers pipeline's component configs (its weights are not used)."""
    return image_flops(
        pipe.unet.config,
        pipe.vae.config,
        pipe.text_encoder.config,
        height=height,
        width=width,
        steps=steps,
        guidance=guidance,
    )
