"""The Neuron backend: optimum-neuron's NeuronStableDiffusionPipeline on Inferentia2 / Trainium.

A Neuron model is compiled for one static shape (batch, height, width). The pure functions here
read that shape from the artifacts, turn a request of another shape into a readable 422, and pad
a smaller batch up to the compiled batch size. optimum-neuron is imported only when loading.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from PIL.Image import Image

from app.backends.base import GenerationParams, StepCallback, UnsupportedRequest, pipeline_arguments, warm_up_params
from app.model_store.source import resolve_model_source
from app.models.builtin import BUILTIN_PREFIX
from app.models.families import SD
from app.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class CompiledShape:
    """The static input shape a Neuron model was compiled for."""

    batch_size: int
    height: int
    width: int

    def as_dict(self) -> dict[str, int]:
        """The shape as JSON for /v1/info."""
        return {"batch_size": self.batch_size, "height": self.height, "width": self.width}


def _neuron_section(config_file: Path) -> dict[str, Any] | None:
    """The "neuron" block optimum-neuron writes into an exported component's config.json."""
    if not config_file.is_file():
        return None
    section = json.loads(config_file.read_text(encoding="utf-8")).get("neuron")
    return section if isinstance(section, dict) else None


def _vae_scale_factor(model_dir: Path) -> int:
    """2 ** (number of VAE blocks - 1), as diffusers computes it; 8 for every Stable Diffusion."""
    for folder in ("vae_decoder", "vae"):
        config_file = model_dir / folder / "config.json"
        if config_file.is_file():
            blocks = json.loads(config_file.read_text(encoding="utf-8")).get("block_out_channels")
            if blocks:
                return 2 ** (len(blocks) - 1)
    return 8


def read_compiled_shape(model_dir: Path, fallback: CompiledShape) -> CompiledShape:
    """The compiled shape stated by the artifacts, else `fallback` (the NEURON_* settings).

    The UNet's neuron config holds the latent height/width (image size / VAE scale); the text
    encoder's holds the prompt batch size (the UNet's may be doubled for classifier-free guidance).
    """
    unet = _neuron_section(model_dir / "unet" / "config.json") or {}
    text_encoder = _neuron_section(model_dir / "text_encoder" / "config.json") or {}
    scale = _vae_scale_factor(model_dir)
    height = unet.get("static_height")
    width = unet.get("static_width")
    batch = text_encoder.get("static_batch_size")
    return CompiledShape(
        batch_size=int(batch) if batch else fallback.batch_size,
        height=int(height) * scale if height else fallback.height,
        width=int(width) * scale if width else fallback.width,
    )


def check_shape(shape: CompiledShape, width: int, height: int) -> None:
    """Raise UnsupportedRequest naming the supported size when (width, height) is not the compiled one."""
    if (width, height) != (shape.width, shape.height):
        raise UnsupportedRequest(
            f"this deployment serves only {shape.width}x{shape.height} images (its Neuron model is compiled "
            f"for that shape); got {width}x{height}"
        )


def pad_batch(items: Sequence[T], size: int) -> list[T]:
    """Repeat the last item until the batch has `size` items (the compiled batch size)."""
    if not items:
        raise ValueError("cannot pad an empty batch")
    if len(items) > size:
        raise ValueError(f"batch of {len(items)} exceeds the compiled batch size {size}")
    return list(items) + [items[-1]] * (size - len(items))


class NeuronBackend:
    """Runs padded batches of the compiled shape on a loaded NeuronStableDiffusionPipeline."""

    name = "neuron"
    family = SD  # NeuronStableDiffusionPipeline serves the SD 1.x/2.x family

    def __init__(self, pipeline: Any, shape: CompiledShape):
        self.pipeline = pipeline
        self.shape = shape
        self.max_batch_size = shape.batch_size
        self.native_size = (shape.width, shape.height)
        self.sizes = (self.native_size,)
        self.bounds = SD.bounds  # within them, check() admits the compiled shape only

    def check(self, params: GenerationParams) -> None:
        """Only the compiled width and height can run."""
        check_shape(self.shape, params.width, params.height)

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image]:
        """Pad to the compiled batch, run once, and return only the real requests' images."""
        padded = pad_batch(batch, self.shape.batch_size)
        output = self.pipeline(**pipeline_arguments(padded, on_step, self.family))
        return list(output.images[: len(batch)])

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """One full batch: the compiled graph has one shape (`size` is always it), so one run warms everything."""
        self.generate([warm_up_params(steps, self.shape.width, self.shape.height, self.family)])

    def describe(self) -> dict[str, Any]:
        """Compiled shape and versions for /v1/info."""
        versions = {}
        for package in ("optimum-neuron", "torch-neuronx", "diffusers"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                versions[package] = "not installed"
        return {
            "device": "neuron",
            "dtype": "compiled",
            "native_size": {"width": self.shape.width, "height": self.shape.height},
            "compiled_shape": self.shape.as_dict(),
            "versions": versions,
        }


def load_neuron_backend(settings: Settings) -> NeuronBackend:
    """Load compiled artifacts (local folder, s3:// prefix or hub id) onto the NeuronCores."""
    if settings.model_id.startswith(BUILTIN_PREFIX):
        raise RuntimeError(
            f"MODEL_ID={settings.model_id} is not Neuron-compiled; point MODEL_ID at artifacts saved by "
            "NeuronStableDiffusionPipeline.save_pretrained (a folder or an s3:// prefix)"
        )
    from optimum.neuron import NeuronStableDiffusionPipeline

    source = resolve_model_source(settings.model_id, settings.model_cache_dir)
    fallback = CompiledShape(settings.neuron_batch_size, settings.neuron_height, settings.neuron_width)
    shape = read_compiled_shape(Path(source), fallback) if isinstance(source, Path) else fallback
    pipeline = NeuronStableDiffusionPipeline.from_pretrained(str(source))
    pipeline.set_progress_bar_config(disable=True)
    return NeuronBackend(pipeline, shape)
