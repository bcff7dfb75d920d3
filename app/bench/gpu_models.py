"""Full-size image pipelines with random weights, built from the published configs with no download.

Each benchmark model is a folder under `gpu_configs/` laid out as a diffusers model folder without weights:
`model_index.json` and each component's `config.json` (the scheduler's `scheduler_config.json`), copied from the
sources in `MODELS`. The pipeline is built component by component on the target device (so a 12 B transformer
never passes through host memory), cast to the benchmark's dtype at once (so only one component is ever in fp32),
and given our own offline tokenizers (app/models: CLIP, T5 and Qwen): their ids fit the published vocabularies,
whose embedding tables stay full size. Random weights cost the same FLOPs as the real ones; their images are noise.

The dry run builds the same folders with `BenchModel.dry_overrides` applied: the same classes and code path at
widths that run on a CPU in seconds.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.qwen_tokenizer_files import build_qwen_tokenizer
from app.models.t5_tokenizer_files import build_t5_tokenizer
from app.models.tokenizer_files import load_tokenizer, write_tokenizer_files

CONFIG_DIR = Path(__file__).resolve().parent / "gpu_configs"
CONFIG_FILE = {"scheduler": "scheduler_config.json"}  # every other component's is config.json
# Entries of model_index.json the benchmark leaves empty: the safety checker and its image processor are not part
# of the generation cost (the service runs without them too).
LEFT_OUT = ("safety_checker", "feature_extractor")

_TINY_CLIP = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
_TINY_VAE = {"block_out_channels": [32, 32, 32, 32], "layers_per_block": 1}
# FLUX.2 [klein] stacks the hidden states of its encoder's layers 9, 18 and 27 (Flux2KleinPipeline's
# text_encoder_out_layers), so the tiny encoder keeps 28 layers, and the transformer's joint_attention_dim is three
# times the encoder's width.
_TINY_QWEN3_LAYERS = 28
_TINY_QWEN3_WIDTH = 16


@dataclass(frozen=True)
class BenchModel:
    """One benchmark model: its config folder (named as its image preset in cdk/image/presets.py) and sources."""

    name: str
    title: str
    source: str  # where each config was read, and what was changed
    dry_overrides: Mapping[str, Mapping[str, Any]]  # component -> config keys the dry run replaces

    @property
    def folder(self) -> Path:
        """The folder holding this model's configs."""
        return CONFIG_DIR / self.name


MODELS: dict[str, BenchModel] = {
    m.name: m
    for m in (
        BenchModel(
            "sd21-base",
            "SD 2.1-base",
            "stabilityai/stable-diffusion-2-1-base as copied in github:jack-op11/stable-diffusion-2-1-base "
            "(model_index.json @88bb1a4, scheduler @49c6b1b, unet, vae, text_encoder @1f75838), verbatim; its UNet "
            "agrees with app/models/sd21_base.py (865,910,724 parameters, tests/app/test_sd21_base.py)",
            {
                "unet": {
                    "block_out_channels": [32, 32, 32, 32],
                    "attention_head_dim": [2, 2, 2, 2],
                    "layers_per_block": 1,
                    "cross_attention_dim": 32,
                },
                "vae": _TINY_VAE,
                "text_encoder": {**_TINY_CLIP, "projection_dim": 32},
            },
        ),
        BenchModel(
            "sdxl-base",
            "SDXL base 1.0",
            "stabilityai/stable-diffusion-xl-base-1.0's architecture as saved in "
            "github:PRITHIVSAKTHIUR/AI-Art-Generator-SDXL @a04712f (an SDXL folder of diffusers 0.22), verbatim; its "
            "unet/config.json equals github:reo224/LoRA_Diffusers @e16b653's but for upcast_attention null/false "
            "(both off)",
            {
                "unet": {
                    "block_out_channels": [32, 32, 64],
                    "attention_head_dim": [2, 2, 4],
                    "transformer_layers_per_block": [1, 1, 1],
                    "layers_per_block": 1,
                    "addition_time_embed_dim": 8,
                    # Both encoders' widths together, and 6 time ids x 8 + the pooled projection's 32.
                    "cross_attention_dim": 64,
                    "projection_class_embeddings_input_dim": 80,
                },
                "vae": _TINY_VAE,
                "text_encoder": {**_TINY_CLIP, "projection_dim": 32},
                "text_encoder_2": {**_TINY_CLIP, "projection_dim": 32},
            },
        ),
        BenchModel(
            "flux-schnell",
            "FLUX.1-schnell",
            "black-forest-labs/FLUX.1-schnell as copied in github:edkamesh/FluX-optimized @2557da9 (_name_or_path "
            "black-forest-labs/FLUX.1-schnell), verbatim but for the bitsandbytes quantization_config that copy added "
            "to transformer/ and text_encoder_2/ (dropped: the benchmark runs bf16); 19 double and 38 single blocks "
            "of 24 x 128 agree with NVIDIA NeMo's FluxConfig",
            {
                "transformer": {
                    "num_layers": 1,
                    "num_single_layers": 1,
                    "attention_head_dim": 16,
                    "num_attention_heads": 2,
                    "axes_dims_rope": [4, 6, 6],
                    "joint_attention_dim": 32,
                    "pooled_projection_dim": 32,
                },
                "vae": _TINY_VAE,
                "text_encoder": {**_TINY_CLIP, "projection_dim": 32},
                "text_encoder_2": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4},
            },
        ),
        BenchModel(
            "flux2-klein-4b",
            "FLUX.2 [klein] 4B",
            "black-forest-labs/FLUX.2-klein-4B: every file as a test fixture pinned to the Hub revision e7b7dc27 "
            "writes it (a Rust worker's FLUX fixture, found by its configs' text; bookkeeping keys _diffusers_version "
            "and _name_or_path absent there and here). Cross-checked: transformer/ equals the klein-4b config of "
            "github:huggingface/diffusers scripts/convert_flux2_to_diffusers.py @207bae7 (5 double and 20 single "
            "blocks of 24 x 128, joint_attention_dim 7680, no guidance embedding); vae/ equals AutoencoderKLFlux2's "
            "defaults in diffusers 0.42.1 (which that script converts into) but for force_upcast, which the class "
            "does not take; text_encoder/ is Qwen/Qwen3-4B's config (36 layers of 2560, 32/8 heads, vocabulary "
            "151,936, tied embeddings) with transformers 5's layer_types; scheduler/ (dynamic shifting, shift 3.0) "
            "as the fixture writes it, the script taking FLUX.2's from FLUX.1-dev's folder. model_index.json names "
            "Qwen2TokenizerFast: our own byte-level Qwen tokenizer stands in (app/models/qwen_tokenizer_files.py)",
            {
                "transformer": {
                    "num_layers": 1,
                    "num_single_layers": 1,
                    "attention_head_dim": 16,
                    "num_attention_heads": 2,
                    "axes_dims_rope": [4, 4, 4, 4],  # sums to attention_head_dim
                    "joint_attention_dim": 3 * _TINY_QWEN3_WIDTH,
                },
                "vae": _TINY_VAE,
                "text_encoder": {
                    "hidden_size": _TINY_QWEN3_WIDTH,
                    "intermediate_size": 32,
                    "num_attention_heads": 2,
                    "num_key_value_heads": 2,
                    "head_dim": 8,
                    "num_hidden_layers": _TINY_QWEN3_LAYERS,
                    "max_window_layers": _TINY_QWEN3_LAYERS,
                    "layer_types": ["full_attention"] * _TINY_QWEN3_LAYERS,
                },
            },
        ),
    )
}


def model_index(model: BenchModel) -> dict[str, Any]:
    """The model's model_index.json."""
    return dict(json.loads((model.folder / "model_index.json").read_text(encoding="utf-8")))


def component_config(model: BenchModel, component: str, *, dry: bool = False) -> dict[str, Any]:
    """One component's published config, with the dry run's overrides when `dry`."""
    path = model.folder / component / CONFIG_FILE.get(component, "config.json")
    config = dict(json.loads(path.read_text(encoding="utf-8")))
    if dry:
        config.update(model.dry_overrides.get(component, {}))
    return config


def _class(library: str, name: str) -> Any:
    return getattr(importlib.import_module(library), name)


def build_module(
    model: BenchModel, component: str, *, dry: bool = False, special_tokens: Mapping[str, int] | None = None
) -> Any:
    """One model component (a torch module) from its config, created on the current default device.

    Call it inside `with torch.device(...)`; `special_tokens` replaces a CLIP text config's token ids with our
    tokenizer's (its vocabulary, a lookup table, keeps the published size).
    """
    library, class_name = model_index(model)[component]
    cls = _class(library, class_name)
    config = component_config(model, component, dry=dry)
    if library == "diffusers":
        return cls.from_config(config)
    if config.get("model_type") == "clip_text_model":
        config.update(special_tokens or {})
    return cls(cls.config_class.from_dict(config))


def component_names(model: BenchModel) -> list[str]:
    """The torch modules of the pipeline, in model_index.json's order (tokenizers, scheduler and LEFT_OUT aside)."""
    index = model_index(model)
    return [
        name
        for name, entry in index.items()
        if isinstance(entry, list)
        and name not in LEFT_OUT
        and name != "scheduler"
        and not name.startswith("tokenizer")
        and entry[0] is not None
    ]


def _tokenizer(class_name: str, tokenizer_dir: Path, max_sequence_length: int | None) -> Any:
    if class_name.startswith("Qwen2Tokenizer"):
        # A folder of its own: its vocab.json is not the CLIP tokenizer's beside it.
        return build_qwen_tokenizer(tokenizer_dir / "qwen")
    if class_name == "CLIPTokenizer":
        return load_tokenizer(tokenizer_dir, 77)  # CLIP's fixed prompt length (max_position_embeddings)
    if class_name.startswith("T5Tokenizer"):
        if max_sequence_length is None:
            raise ValueError("a T5 tokenizer needs the family's max_sequence_length")
        return build_t5_tokenizer(max_sequence_length)
    raise ValueError(f"no offline tokenizer for {class_name}")


def build_pipeline(
    model: BenchModel,
    *,
    device: Any,
    dtype: Any,
    tokenizer_dir: Path,
    max_sequence_length: int | None,
    dry: bool = False,
) -> Any:
    """The model's diffusers pipeline with random weights on `device` in `dtype`, one component at a time."""
    import torch

    index = model_index(model)
    special = write_tokenizer_files(tokenizer_dir)
    special_tokens = {
        "bos_token_id": special["bos_token_id"],
        "eos_token_id": special["eos_token_id"],
        "pad_token_id": special["eos_token_id"],
    }
    parts: dict[str, Any] = {name: None for name in LEFT_OUT if name in index}
    for name in component_names(model):
        with torch.device(device):
            module = build_module(model, name, dry=dry, special_tokens=special_tokens)
        parts[name] = module.to(dtype=dtype).eval()
    for name, entry in index.items():
        if name.startswith("tokenizer"):
            parts[name] = _tokenizer(entry[1], tokenizer_dir, max_sequence_length)
    library, class_name = index["scheduler"]
    parts["scheduler"] = _class(library, class_name).from_config(component_config(model, "scheduler"))
    # Scalar entries (requires_safety_checker, force_zeros_for_empty_prompt) are the pipeline's own arguments, as
    # diffusers' from_pretrained passes them.
    options = {k: v for k, v in index.items() if not k.startswith("_") and not isinstance(v, list)}
    pipe = _class("diffusers", index["_class_name"])(**parts, **options)
    pipe.set_progress_bar_config(disable=True)
    return pipe
