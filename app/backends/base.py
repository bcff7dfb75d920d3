"""What every backend offers the service: the request type, the protocol and its errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from PIL.Image import Image

from app.models.families import SD, Family, Size, SizeBounds
from common.lora_keys import LoraSet

StepCallback = Callable[[int, int], None]
"""Called after each denoising step with (steps done, total steps)."""


IMAGE_TO_IMAGE = "image-to-image"
INPAINT = "inpaint"
EditMode = str  # IMAGE_TO_IMAGE | INPAINT


# eq=False: two edits are the same only if they are one object (images compare by identity, not pixels).
@dataclass(frozen=True, eq=False)
class EditInput:
    """What an edit starts from: the image at the request's size, the mask (L, white = repaint) or None, and
    how far from the image the result may go (diffusers' `strength`, 0..1)."""

    image: Image
    mask: Image | None
    strength: float

    @property
    def mode(self) -> EditMode:
        """INPAINT with a mask, IMAGE_TO_IMAGE without."""
        return IMAGE_TO_IMAGE if self.mask is None else INPAINT


@dataclass(frozen=True)
class GenerationParams:
    """One fully resolved image request (defaults filled in, bounds checked)."""

    prompt: str
    negative_prompt: str
    steps: int
    guidance_scale: float | None  # None for a guidance-distilled family (no classifier-free guidance)
    width: int
    height: int
    seed: int
    loras: LoraSet = ()  # the LoRA adapters, sorted by name (app/loras.py)
    edit: EditInput | None = None  # None: text to image

    @property
    def batch_key(self) -> tuple[int, int, int, float | None, LoraSet, tuple[EditMode, float] | None]:
        """Requests with equal keys can share one pipeline call: the adapters are set for the whole call, an edit's
        pipeline is another one, and its strength is one argument for the whole call (images and masks go per
        image)."""
        edit = None if self.edit is None else (self.edit.mode, self.edit.strength)
        return (self.width, self.height, self.steps, self.guidance_scale, self.loras, edit)


def warm_up_params(steps: int, width: int, height: int, family: Family = SD) -> GenerationParams:
    """The request every backend's warm-up runs: a fixed prompt and seed, guidance as the family serves it."""
    return GenerationParams("warm-up", "", steps, family.default_guidance, width, height, 0)


def family_arguments(family: Family, guidance_scale: float | None) -> dict[str, Any]:
    """The call arguments that depend on the family: guidance where it applies, the prompt length, fixed ones.

    Warm-up and serving must pass the same ones: the prompt length is part of a compiled graph's shape.
    """
    arguments: dict[str, Any] = dict(family.fixed_arguments)
    if family.guidance:
        arguments[family.guidance_argument] = family.default_guidance if guidance_scale is None else guidance_scale
    if family.max_sequence_length is not None:
        arguments["max_sequence_length"] = family.max_sequence_length
    return arguments


def pipeline_arguments(
    batch: Sequence[GenerationParams], on_step: StepCallback | None, family: Family = SD
) -> dict[str, Any]:
    """The diffusers-style call arguments every backend passes for a batch of compatible requests.

    One seeded CPU generator per image: CPU generators give the same noise whatever the device, so
    a seed means the same image. `on_step` hears (steps done, total) after each denoising step. A
    negative prompt goes only to a family it acts on (app.params refuses one elsewhere).
    """
    import torch

    steps = batch[0].steps

    def step_end(_pipe: Any, step: int, _timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        if on_step is not None:
            on_step(step + 1, steps)
        return tensors

    arguments: dict[str, Any] = {
        "prompt": [p.prompt for p in batch],
        "num_inference_steps": steps,
        "generator": [torch.Generator("cpu").manual_seed(p.seed) for p in batch],
        "callback_on_step_end": step_end,
        **family_arguments(family, batch[0].guidance_scale),
    }
    if family.negative_prompt:
        arguments["negative_prompt"] = [p.negative_prompt for p in batch]
    return arguments


def edit_arguments(batch: Sequence[GenerationParams]) -> dict[str, Any]:
    """The image-to-image or inpainting arguments of a batch of edits sharing a batch key (none for text to image)."""
    edit = batch[0].edit
    if edit is None:
        return {}
    arguments: dict[str, Any] = {"image": [p.edit.image for p in batch if p.edit], "strength": edit.strength}
    if edit.mask is not None:
        arguments["mask_image"] = [p.edit.mask for p in batch if p.edit]
    return arguments


class UnsupportedRequest(ValueError):
    """The backend cannot serve this request (e.g. a shape the model was not compiled for): a 422 whose `detail`
    names each field, like a validation error's."""

    def __init__(self, *problems: tuple[str, str]) -> None:
        self.problems = problems  # (field, readable message) pairs
        super().__init__("; ".join(message for _, message in problems))

    @property
    def detail(self) -> list[dict[str, str]]:
        """The API's 422 `detail`: one {field, message} per problem."""
        return [{"field": field, "message": message} for field, message in self.problems]


class LoraRefused(UnsupportedRequest):
    """The request's `loras` cannot be served here (unknown adapter, bad scale, too many, not fused on Neuron)."""

    def __init__(self, message: str) -> None:
        super().__init__(("loras", message))


class Backend(Protocol):
    """A loaded pipeline on one accelerator, called from a worker thread one batch at a time."""

    name: str  # "cpu" | "cuda" | "neuron"
    family: Family  # the model's family: defaults, bounds and the controls that apply
    max_batch_size: int  # the most requests one generate() call accepts
    native_size: Size  # (width, height) used when a request names none
    sizes: tuple[Size, ...]  # the (width, height)s to offer (the UI's presets): the native size first
    bounds: SizeBounds  # the family's request bounds at this model's scale
    edit_modes: frozenset[EditMode]  # the edits this backend runs (empty: text to image only)

    def check(self, params: GenerationParams) -> None:
        """Raise UnsupportedRequest when this backend cannot serve `params`."""
        ...

    def default_strength(self, mode: EditMode) -> float:
        """The strength an edit of `mode` gets when the request names none (one of edit_modes)."""
        ...

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image]:
        """Generate one image per request, in order; all requests share a batch_key."""
        ...

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """Run every shape the backend will serve at the default (width, height) once, before readiness."""
        ...

    def describe(self) -> dict[str, Any]:
        """Facts for GET /v1/info: device, dtype, compiled shape, versions."""
        ...
