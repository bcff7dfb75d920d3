"""The diffusers pipeline of the model's family as a backend; the CPU and CUDA backends share it."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL.Image import Image

from app.backends.base import (
    IMAGE_TO_IMAGE,
    INPAINT,
    EditMode,
    GenerationParams,
    StepCallback,
    UnsupportedRequest,
    edit_arguments,
    pipeline_arguments,
    warm_up_params,
)
from app.backends.lora_slots import LoraSlots
from app.models.families import (
    FLUX2_KLEIN,
    FLUX_SCHNELL,
    SD,
    Family,
    Size,
    SizeBounds,
    UnknownFamily,
    family_of,
    family_of_class,
)


def family_of_source(source: Path | str) -> Family:
    """The family of a local diffusers folder or a hub id, from its model_index.json."""
    if isinstance(source, Path) or Path(source).is_dir():
        return family_of(Path(source))
    from diffusers import DiffusionPipeline

    return family_of_class(str(DiffusionPipeline.load_config(source).get("_class_name")))


def load_diffusers_pipeline(source: Path | str, dtype: Any = None) -> tuple[Any, Family]:
    """Load a diffusers folder or hub id with its family's pipeline class; return it and the family.

    The class comes from model_index.json (checked against the served families first), so a folder of
    an unserved pipeline stops with a message naming the served ones instead of loading half-way.
    """
    import diffusers

    family = family_of_source(source)
    pipeline_class = getattr(diffusers, family.pipeline_classes[0])
    kwargs: dict[str, Any] = {}
    if family is SD:  # only SD 1.x/2.x folders carry a safety checker; the service runs without it
        kwargs = {"safety_checker": None, "requires_safety_checker": False}
    if dtype is not None:
        kwargs["dtype"] = dtype
    pipeline = pipeline_class.from_pretrained(str(source), **kwargs)
    check_served_variant(pipeline, family)
    pipeline.set_progress_bar_config(disable=True)  # progress goes to the UI, not to stderr
    return pipeline, family


def check_served_variant(pipeline: Any, family: Family) -> None:
    """Refuse a FluxPipeline folder whose transformer embeds guidance (FLUX.1-dev and its kind), and an
    undistilled Flux2KleinPipeline ([klein] Base).

    It shares schnell's pipeline class, but needs guidance and some 28-50 steps, where the flux family's
    facts are schnell's; FLUX.1-dev's licence is also non-commercial. Serving it with schnell's defaults
    would give poor images without a word, so the load stops and says why.
    """
    if family is FLUX_SCHNELL and bool(pipeline.transformer.config.guidance_embeds):
        raise UnknownFamily(
            "this FluxPipeline's transformer embeds guidance (FLUX.1-dev-like): the service serves "
            "guidance-distilled FLUX.1-schnell models only"
        )
    if family is FLUX2_KLEIN and not bool(pipeline.config.get("is_distilled", False)):
        raise UnknownFamily(
            "this Flux2KleinPipeline is not step-distilled (a [klein] Base model, model_index.json "
            "is_distilled false): it needs guidance and some 50 steps, where the service serves the distilled "
            "FLUX.2 [klein] models (4 steps, no guidance)"
        )


def native_side(pipeline: Any, family: Family) -> int:
    """The side of the square size the model was trained at.

    UNet families: the UNet's sample size times the VAE scale (SDXL base: 128 x 8 = 1024). The transformer
    families have no sample size on the transformer; their VAE's `sample_size` is the pixel size
    (FLUX.1-schnell: 1024). Qwen-Image's VAE states none: its family's reference side (1328) then, unless the
    folder's vae/config.json states one (the built-in tiny model does; diffusers keeps the key in the config).
    """
    unet = getattr(pipeline, "unet", None)
    if unet is not None:
        return int(unet.config.sample_size) * int(pipeline.vae_scale_factor)
    sample_size = pipeline.vae.config.get("sample_size")
    return int(sample_size) if sample_size is not None else family.reference_side


def denoiser(pipeline: Any) -> Any:
    """The network that runs every step: the UNet (SD, SDXL) or the transformer (the others)."""
    unet = getattr(pipeline, "unet", None)
    return unet if unet is not None else pipeline.transformer


def edit_pipelines(pipeline: Any) -> dict[EditMode, Any]:
    """The image-to-image and inpainting pipelines of the loaded pipeline's family, made from its components
    (diffusers' `from_pipe`: the same modules, no second copy of the weights); a mode whose family diffusers
    has no such pipeline for is left out (its AutoPipeline mapping raises ValueError), and so is one whose
    pipeline takes no `strength` (or, to inpaint, no `mask_image`): FLUX.2 [klein]'s image-to-image entry in
    diffusers 0.42 is its text-to-image pipeline, which takes the image as a reference, not as a start."""
    from diffusers import AutoPipelineForImage2Image, AutoPipelineForInpainting

    pipelines: dict[EditMode, Any] = {}
    for mode, auto in ((IMAGE_TO_IMAGE, AutoPipelineForImage2Image), (INPAINT, AutoPipelineForInpainting)):
        try:
            edit = auto.from_pipe(pipeline)
        except ValueError:
            continue
        parameters = call_parameters(edit)
        if "strength" not in parameters or (mode == INPAINT and "mask_image" not in parameters):
            continue
        edit.set_progress_bar_config(disable=True)
        pipelines[mode] = edit
    return pipelines


def call_parameters(pipeline: Any) -> Mapping[str, inspect.Parameter]:
    """The parameters of a pipeline's `__call__` (what it takes, and its defaults)."""
    return inspect.signature(pipeline.__call__).parameters


class DiffusersBackend:
    """Runs batches on a loaded diffusers pipeline; any size on its family's grid is served."""

    def __init__(
        self, pipeline: Any, family: Family, name: str, max_batch_size: int, lora_slots: LoraSlots | None = None
    ):
        self.pipeline = pipeline
        self.family = family
        self.name = name
        self.max_batch_size = max_batch_size
        self.side = native_side(pipeline, family)
        self.sizes: tuple[Size, ...] = family.sizes_at(self.side)
        self.native_size: Size = self.sizes[0]
        self.bounds: SizeBounds = family.bounds_at(self.side)
        self.lora_slots = lora_slots or LoraSlots(pipeline, None, 1)
        self._edit_pipelines = edit_pipelines(pipeline)
        self.edit_modes: frozenset[EditMode] = frozenset(self._edit_pipelines)

    @property
    def device(self) -> str:
        """Where the pipeline's weights live, e.g. "cpu" or "cuda:0"."""
        return str(self.pipeline.device)

    def check(self, params: GenerationParams) -> None:
        """Every size the family's bounds admit (checked in app.params) works with a diffusers pipeline; an
        edit needs its family's edit pipeline."""
        if params.edit is not None and params.edit.mode not in self.edit_modes:
            raise UnsupportedRequest(
                ("init_image", f"{self.family.title} has no {params.edit.mode} pipeline in diffusers")
            )

    def default_strength(self, mode: EditMode) -> float:
        """The strength diffusers' pipeline for `mode` defaults to (SD 0.8 / 1.0, SDXL 0.3 / 0.9999, Flux 0.6
        in diffusers 0.42: image-to-image / inpainting)."""
        return float(call_parameters(self._edit_pipelines[mode])["strength"].default)

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image]:
        """One pipeline call for the whole batch, one seeded generator per image."""
        import torch

        self.lora_slots.activate(batch[0].loras)  # one adapter set per batch: it is part of the batch key
        edit = batch[0].edit
        pipeline = self.pipeline if edit is None else self._edit_pipelines[edit.mode]
        arguments = {**pipeline_arguments(batch, on_step, self.family), **edit_arguments(batch)}
        # SD's image-to-image pipeline takes no size (the image's is used: it comes at the request's size).
        if "width" in call_parameters(pipeline):
            arguments.update(width=batch[0].width, height=batch[0].height)
        with torch.inference_mode():
            output = pipeline(**arguments, output_type="pil")
        return list(output.images)

    def warm_up(self, steps: int, size: Size) -> None:
        """One generation at the default (width, height): loads lazy weights and allocator pools."""
        self.generate([warm_up_params(steps, *size, self.family)])

    def describe(self) -> dict[str, Any]:
        """Device, dtype, family and library versions for /v1/info."""
        import diffusers
        import torch

        return {
            "device": self.device,
            "dtype": str(denoiser(self.pipeline).dtype).removeprefix("torch."),
            "native_size": {"width": self.native_size[0], "height": self.native_size[1]},
            "compiled_shapes": None,
            "loras_loaded": self.lora_slots.loaded,
            "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__},
        }
