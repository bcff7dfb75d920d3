"""Image model families: what each kind of diffusers pipeline was trained for and what a request may ask of it.

A model folder names its pipeline class in `model_index.json` (`_class_name`); that class decides the family,
and the family decides the sizes offered, the defaults, the request bounds and which controls apply. The API,
the UI, the backends and the Neuron compile read these facts from here and nowhere else.

Sources (read at the pinned versions):
- diffusers 0.42.1 (the CPU/CUDA images) and 0.35 (the Neuron image), `pipelines/auto_pipeline.py`: the
  text-to-image classes per family ("stable-diffusion", "stable-diffusion-xl", "flux").
- `StableDiffusionPipeline.__call__`: 50 steps, guidance 7.5 by default; SD 2.1-base trains at 512 px.
- `StableDiffusionXLPipeline.__call__`: 50 steps, guidance 5.0; `default_sample_size` = UNet sample_size (128)
  x VAE scale 8 = 1024. The trained aspect buckets at about 1024^2 pixels (SDXL paper, appendix I) as quoted
  in github.com/hkpD/sd-simple-dimension-preset README and astriaai/astria-docs docs/use-cases/sdxl-training.md.
- `FluxPipeline.check_inputs`: sides divisible by vae_scale_factor * 2 = 16 (packed 2x2 latents);
  `default_sample_size` 128 x 8 = 1024; the transformer's `guidance_embeds` is false for FLUX.1-schnell,
  so `guidance_scale` is ignored, and a negative prompt only acts through `true_cfg_scale` > 1.
  FLUX.1-schnell's model card: 4 steps, guidance_scale 0.0, max_sequence_length 256.
- The 2026 families (diffusers 0.42.1 `pipelines/flux2`, `z_image`, `qwenimage`): each packs 2x2 latent patches
  over an 8x VAE, so sides are multiples of 16, and each encodes the prompt with a Qwen model at
  max_sequence_length 512 (the `__call__` defaults).
  - `Flux2KleinPipeline`: FLUX.2 [klein] 4B's model_index.json says `"is_distilled": true` (huggingface.co/
    black-forest-labs/FLUX.2-klein-4B/blob/main/model_index.json); a distilled model ignores guidance above 1
    (`check_inputs`), its defaults are 4 steps at guidance 1.0 and its sizes 1024x1024, 1344x768, 768x1344
    (docs.empiriolabs.ai/models/flux-2-klein-4b; BFL's flux2 README: "Step-distilled" 4B). It takes no
    negative prompt (`__call__` has no such argument).
  - `ZImagePipeline`: Z-Image-Turbo's card runs 9 steps at guidance_scale 0.0, 1024x1024 (the card's example, as
    quoted by sumitkant.github.io's Z-Image-Turbo field guide and deepwiki iconben/z-image-studio); without
    guidance a negative prompt does nothing.
  - `QwenImagePipeline`: guidance is true classifier-free guidance, `true_cfg_scale` (4.0, 50 steps, negative
    prompt " "), at the card's sizes 1328x1328, 1664x928, 928x1664, 1584x1056, 1056x1584 (Qwen/Qwen-Image's
    card as quoted in Ascend/MindSpeed-MM examples/diffusers/qwen_image; its 4:3 pair has a side of 1140, off
    the grid of 16, and is left out). `__call__` runs guidance only when a negative prompt is given, which
    `pipeline_arguments` always does for a family that takes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Size = tuple[int, int]  # (width, height)


@dataclass(frozen=True)
class SizeBounds:
    """The sides a model can draw: between two bounds, on a grid."""

    min_side: int
    max_side: int
    multiple_of: int

    def side_problems(self, width: int, height: int, title: str) -> list[tuple[str, str]]:
        """Why (width, height) is outside these bounds: (the side's name, a readable line) per side outside them."""
        return [
            (
                name,
                f"{name} must be a multiple of {self.multiple_of} between {self.min_side} and {self.max_side} "
                f"for this {title} model; got {value}",
            )
            for name, value in (("width", width), ("height", height))
            if not self.min_side <= value <= self.max_side or value % self.multiple_of
        ]

    def problems(self, width: int, height: int, title: str) -> list[str]:
        """Why (width, height) is outside these bounds, one readable line per side: empty when inside."""
        return [message for _, message in self.side_problems(width, height, title)]

    def within(self, min_side: int, max_side: int) -> SizeBounds:
        """These bounds narrowed to [min_side, max_side] (an operator's MIN_SIZE/MAX_SIZE), kept on the grid."""
        low = -(-max(self.min_side, min_side) // self.multiple_of) * self.multiple_of
        high = min(self.max_side, max_side) // self.multiple_of * self.multiple_of
        return SizeBounds(low, high, self.multiple_of)


@dataclass(frozen=True)
class Family:
    """The facts of one image model family, at its reference resolution."""

    name: str  # "sd" | "sdxl" | "flux" | ...: the value /v1/info and the model catalog use
    title: str  # for people: the UI and the docs
    pipeline_classes: tuple[str, ...]  # diffusers `_class_name`s of model_index.json in this family
    native_sizes: tuple[Size, ...]  # trained (width, height)s at `reference_side`; the first is the default
    reference_side: int  # the side of the square native size the sizes above belong to
    default_steps: int
    default_guidance: float | None  # None: guidance-distilled, a request may not set guidance
    min_side: int
    max_side: int
    multiple_of: int
    negative_prompt: bool  # whether a negative prompt acts on this family
    max_sequence_length: int | None = None  # the text encoder's prompt length in tokens, where the pipeline takes one
    guidance_argument: str = "guidance_scale"  # the call argument a request's guidance goes to
    # Call arguments every generation passes, where the pipeline's own default is wrong for the family (a
    # guidance-distilled model whose pipeline defaults to classifier-free guidance).
    fixed_arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def guidance(self) -> bool:
        """Whether classifier-free guidance applies (a guidance control, a guidance_scale field)."""
        return self.default_guidance is not None

    @property
    def default_size(self) -> Size:
        """The (width, height) a request that names none gets at the reference resolution."""
        return self.native_sizes[0]

    def sizes_at(self, side: int) -> tuple[Size, ...]:
        """The native sizes scaled to a model whose square native size is `side` (e.g. a tiny model's 128).

        Each side is rounded to `multiple_of`; a real model at the reference side gets the sizes unchanged.
        """
        scaled: list[Size] = []
        for width, height in self.native_sizes:
            size = (self._round(width * side / self.reference_side), self._round(height * side / self.reference_side))
            if size not in scaled:
                scaled.append(size)
        return tuple(scaled)

    @property
    def bounds(self) -> SizeBounds:
        """The request bounds of a model at the reference resolution."""
        return SizeBounds(self.min_side, self.max_side, self.multiple_of)

    def bounds_at(self, side: int) -> SizeBounds:
        """The bounds scaled to a model whose square native size is `side`, like `sizes_at`."""
        if side == self.reference_side:
            return self.bounds
        scale = side / self.reference_side
        return SizeBounds(self._round(self.min_side * scale), self._round(self.max_side * scale), self.multiple_of)

    def size_problems(self, width: int, height: int) -> list[str]:
        """Why (width, height) cannot be served by a model of this family at its reference resolution."""
        return self.bounds.problems(width, height, self.title)

    def _round(self, value: float) -> int:
        return max(self.multiple_of, round(value / self.multiple_of) * self.multiple_of)


SD = Family(
    name="sd",
    title="Stable Diffusion 1.x/2.x",
    pipeline_classes=("StableDiffusionPipeline",),
    # SD 1.x and 2.x-base train on squares at 512 px (2.x-v at 768: the backend reads the UNet's size).
    native_sizes=((512, 512),),
    reference_side=512,
    default_steps=25,  # DDIM/PNDM give usable images from about 25 steps; diffusers' default is 50
    default_guidance=7.5,  # StableDiffusionPipeline.__call__'s default
    min_side=64,
    max_side=1024,
    multiple_of=8,  # the VAE's 8x scale
    negative_prompt=True,
)

SDXL = Family(
    name="sdxl",
    title="Stable Diffusion XL",
    pipeline_classes=("StableDiffusionXLPipeline",),
    native_sizes=(
        (1024, 1024),
        (896, 1152),
        (1152, 896),
        (832, 1216),
        (1216, 832),
        (768, 1344),
        (1344, 768),
        (640, 1536),
        (1536, 640),
    ),
    reference_side=1024,
    default_steps=30,
    default_guidance=5.0,  # StableDiffusionXLPipeline.__call__'s default
    min_side=64,
    max_side=1536,
    multiple_of=8,
    negative_prompt=True,
)

FLUX_SCHNELL = Family(
    name="flux",
    title="FLUX.1-schnell",
    pipeline_classes=("FluxPipeline",),
    native_sizes=((1024, 1024), (768, 1024), (1024, 768), (768, 1344), (1344, 768)),
    reference_side=1024,
    default_steps=4,  # guidance-distilled: the model card's 4 steps
    default_guidance=None,  # no classifier-free guidance: schnell's transformer has no guidance embedding
    min_side=256,
    max_side=2048,
    multiple_of=16,  # FluxPipeline packs 2x2 latent patches over the VAE's 8x scale
    negative_prompt=False,
    max_sequence_length=256,  # schnell's T5 prompt length (the model card)
)

FLUX2_KLEIN = Family(
    name="flux2-klein",
    title="FLUX.2 [klein]",
    pipeline_classes=("Flux2KleinPipeline",),
    native_sizes=((1024, 1024), (1344, 768), (768, 1344)),
    reference_side=1024,
    default_steps=4,  # step-distilled
    default_guidance=None,  # a distilled klein ignores guidance above 1
    min_side=256,
    max_side=2048,  # up to 4 megapixels
    multiple_of=16,
    negative_prompt=False,
    max_sequence_length=512,
    fixed_arguments=(("guidance_scale", 1.0),),  # the pipeline's default 4.0 only earns a warning when distilled
)

Z_IMAGE_TURBO = Family(
    name="z-image",
    title="Z-Image Turbo",
    pipeline_classes=("ZImagePipeline",),
    native_sizes=((1024, 1024),),
    reference_side=1024,
    default_steps=9,  # the card: 9 steps, 8 transformer passes
    default_guidance=None,
    min_side=256,
    max_side=2048,
    multiple_of=16,
    negative_prompt=False,
    max_sequence_length=512,
    fixed_arguments=(("guidance_scale", 0.0),),  # the pipeline's default 5.0 would run guidance Turbo has not
)

QWEN_IMAGE = Family(
    name="qwen-image",
    title="Qwen-Image",
    pipeline_classes=("QwenImagePipeline",),
    native_sizes=((1328, 1328), (1664, 928), (928, 1664), (1584, 1056), (1056, 1584)),
    reference_side=1328,
    default_steps=50,
    default_guidance=4.0,
    min_side=256,
    max_side=2048,
    multiple_of=16,
    negative_prompt=True,
    max_sequence_length=512,
    guidance_argument="true_cfg_scale",
)

FAMILIES: tuple[Family, ...] = (SD, SDXL, FLUX_SCHNELL, FLUX2_KLEIN, Z_IMAGE_TURBO, QWEN_IMAGE)


class UnknownFamily(ValueError):
    """The model folder's pipeline class belongs to no family this service serves."""


def family_named(name: str) -> Family:
    """The family called `name` ("sd", "sdxl", "flux", ...), or UnknownFamily naming the known ones."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise UnknownFamily(f"unknown image model family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


def family_of_class(class_name: str) -> Family:
    """The family of a diffusers pipeline class name, or UnknownFamily listing the served classes."""
    for family in FAMILIES:
        if class_name in family.pipeline_classes:
            return family
    served = ", ".join(c for f in FAMILIES for c in f.pipeline_classes)
    raise UnknownFamily(f"pipeline class {class_name!r} is not served; this service serves {served}")


def family_of(model_dir: Path) -> Family:
    """The family of a diffusers model folder, read from its model_index.json's `_class_name`."""
    index = Path(model_dir) / "model_index.json"
    try:
        class_name = json.loads(index.read_text(encoding="utf-8")).get("_class_name")
    except FileNotFoundError:
        raise UnknownFamily(f"{index} does not exist: not a diffusers model folder") from None
    except (json.JSONDecodeError, AttributeError) as error:
        raise UnknownFamily(f"{index} is not a JSON object: {error}") from None
    if not isinstance(class_name, str):
        raise UnknownFamily(f"{index} names no pipeline class (_class_name)")
    return family_of_class(class_name)
