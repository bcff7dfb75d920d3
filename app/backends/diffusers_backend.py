"""The diffusers StableDiffusionPipeline as a backend; the CPU and CUDA backends share it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL.Image import Image

from app.backends.base import GenerationParams, StepCallback, pipeline_arguments, warm_up_params


def load_diffusers_pipeline(source: str, dtype: Any = None) -> Any:  # a StableDiffusionPipeline
    """Load a diffusers folder or hub id through the normal loader, without a safety checker."""
    from diffusers import StableDiffusionPipeline

    kwargs: dict[str, Any] = {"safety_checker": None, "requires_safety_checker": False}
    if dtype is not None:
        kwargs["dtype"] = dtype
    pipeline = StableDiffusionPipeline.from_pretrained(source, **kwargs)
    pipeline.set_progress_bar_config(disable=True)  # progress goes to the UI, not to stderr
    return pipeline


def native_size(pipeline: Any) -> tuple[int, int]:
    """The (width, height) the UNet was trained for: its sample size times the VAE scale."""
    side = int(pipeline.unet.config.sample_size) * int(pipeline.vae_scale_factor)
    return (side, side)


class DiffusersBackend:
    """Runs batches on a loaded diffusers pipeline; requests of any size (multiple of 8) are served."""

    def __init__(self, pipeline: Any, name: str, max_batch_size: int):
        self.pipeline = pipeline
        self.name = name
        self.max_batch_size = max_batch_size
        self.native_size = native_size(pipeline)

    @property
    def device(self) -> str:
        """Where the pipeline's weights live, e.g. "cpu" or "cuda:0"."""
        return str(self.pipeline.device)

    def check(self, params: GenerationParams) -> None:
        """Every size the request bounds admit (multiples of 8, checked in app.params) works with a UNet."""

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image]:
        """One pipeline call for the whole batch, one seeded generator per image."""
        import torch

        with torch.inference_mode():
            output = self.pipeline(
                **pipeline_arguments(batch, on_step),
                width=batch[0].width,
                height=batch[0].height,
                output_type="pil",
            )
        return list(output.images)

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """One generation at the default (width, height): loads lazy weights and allocator pools."""
        self.generate([warm_up_params(steps, *size)])

    def describe(self) -> dict[str, Any]:
        """Device, dtype and library versions for /v1/info."""
        import diffusers
        import torch

        return {
            "device": self.device,
            "dtype": str(self.pipeline.unet.dtype).removeprefix("torch."),
            "native_size": {"width": self.native_size[0], "height": self.native_size[1]},
            "compiled_shapes": None,
            "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__},
        }
