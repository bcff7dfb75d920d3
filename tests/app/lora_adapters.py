"""Tiny LoRA adapters for the built-in tiny SD pipeline, made in the test the way a trainer saves them: peft's
LoraConfig on the UNet's attention projections, random non-zero weights, written in diffusers' format
(`save_lora_weights`), so the service loads them as it would load a downloaded adapter."""

from __future__ import annotations

from pathlib import Path

# The UNet's attention projections: query, key, value and output.
TARGET_MODULES = ["to_q", "to_k", "to_v", "to_out.0"]


def make_adapter(model_dir: Path, folder: Path, name: str, seed: int, std: float = 0.5) -> Path:
    """Write `folder/NAME.safetensors`: a rank-4 LoRA for the UNet in `model_dir`, random weights from `seed`."""
    import torch
    from diffusers import StableDiffusionPipeline, UNet2DConditionModel
    from diffusers.utils import convert_state_dict_to_diffusers
    from peft import LoraConfig, get_peft_model_state_dict

    unet = UNet2DConditionModel.from_pretrained(model_dir / "unet")
    unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=TARGET_MODULES))
    generator = torch.Generator().manual_seed(seed)
    for parameter_name, parameter in unet.named_parameters():
        if "lora_" in parameter_name:  # peft starts lora_B at zero: an adapter that changes nothing
            parameter.data = torch.randn(parameter.shape, generator=generator) * std
    weights = convert_state_dict_to_diffusers(get_peft_model_state_dict(unet))
    StableDiffusionPipeline.save_lora_weights(
        save_directory=str(folder), unet_lora_layers=weights, weight_name=f"{name}.safetensors"
    )
    return folder / f"{name}.safetensors"
