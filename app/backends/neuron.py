"""The Neuron backend: optimum-neuron's compiled pipelines on Inferentia2 / Trainium, one per image size.

A Neuron pipeline is compiled for one static shape (batch, height, width), so a pod that serves several
sizes loads one compiled pipeline per size: MODEL_ID holds a `<W>x<H>/` folder for each (written by
app/model_store/neuron_compile.py), NEURON_SHAPES names the ones to serve. Each batch (the batcher groups
requests by size) runs on the pipeline of its size; a size not compiled is a readable 422 that lists the
sizes served, and a smaller batch is padded up to the compiled batch size. The family (model_index.json)
picks the optimum-neuron class, which is imported only when loading.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from PIL.Image import Image

from app.backends.base import (
    EditMode,
    GenerationParams,
    LoraRefused,
    StepCallback,
    UnsupportedRequest,
    pipeline_arguments,
    warm_up_params,
)
from app.loras import fused_lora_problems
from app.model_store.neuron_compile import check_served_variant, pipeline_class_name
from app.model_store.source import resolve_compiled_source
from app.models.builtin import BUILTIN_PREFIX
from app.models.families import Family, Size, UnknownFamily, family_of
from app.settings import Settings
from common.lora_keys import LoraSet
from common.model_store.layout import COMPLETE_MARKER, ImageSize

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
    """The compiled shape stated by the artifacts, else `fallback` (NEURON_BATCH_SIZE and the folder's size).

    The UNet's neuron config holds the latent height/width (image size / VAE scale); the text
    encoder's holds the prompt batch size (the UNet's may be doubled for classifier-free guidance).
    A Flux folder has no UNet: its size is the folder's name.
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


def size_list(sizes: Sequence[tuple[int, int]]) -> str:
    """`1024x1024, 896x1152 and 1152x896`: sizes for a message."""
    names = [f"{w}x{h}" for w, h in sizes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def check_size(served: Sequence[tuple[int, int]], width: int, height: int) -> None:
    """Raise UnsupportedRequest listing the sizes served when (width, height) is not one of them."""
    if (width, height) not in served:
        raise UnsupportedRequest(
            (
                "size",
                f"this deployment serves only {size_list(served)} images (its Neuron model is compiled for "
                f"{'that size' if len(served) == 1 else 'those sizes'}); got {width}x{height}",
            )
        )


def pad_batch(items: Sequence[T], size: int) -> list[T]:
    """Repeat the last item until the batch has `size` items (the compiled batch size)."""
    if not items:
        raise ValueError("cannot pad an empty batch")
    if len(items) > size:
        raise ValueError(f"batch of {len(items)} exceeds the compiled batch size {size}")
    return list(items) + [items[-1]] * (size - len(items))


@dataclass(frozen=True)
class CompiledPipeline:
    """One loaded compiled pipeline and the shape it was compiled for."""

    pipeline: Any
    shape: CompiledShape

    @property
    def size(self) -> tuple[int, int]:
        """(width, height)."""
        return (self.shape.width, self.shape.height)


@dataclass
class NeuronBackend:
    """Runs padded batches on the compiled pipeline of their size; the first pipeline's size is the default."""

    compiled: Sequence[CompiledPipeline]
    family: Family
    fused_loras: LoraSet = ()  # the adapters fused into every compiled pipeline (NEURON_LORAS)
    name: str = field(default="neuron", init=False)
    # Not built yet: optimum-neuron 0.4.5 documents NeuronStableDiffusion(XL)Img2ImgPipeline and
    # ...InpaintPipeline (its SD export compiles a VAE encoder too), but this backend loads the text-to-image
    # class only; edits are refused by name here and run on a GPU or CPU pool (docs/serving.md).
    edit_modes: frozenset[EditMode] = field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        if not self.compiled:
            raise ValueError("a Neuron backend needs at least one compiled pipeline")
        self._by_size = {c.size: c for c in self.compiled}
        if len(self._by_size) != len(self.compiled):
            raise ValueError(f"two compiled pipelines for one size: {size_list([c.size for c in self.compiled])}")
        # One batcher serves every size, so a batch may hold no more than the smallest compiled batch.
        self.max_batch_size = min(c.shape.batch_size for c in self.compiled)
        self.native_size = self.compiled[0].size
        self.sizes: tuple[Size, ...] = tuple(c.size for c in self.compiled)  # the UI's presets: the compiled ones
        self.bounds = self.family.bounds  # within them, check() admits the compiled sizes only

    def check(self, params: GenerationParams) -> None:
        """Only a compiled width and height can run, only the adapters fused at compile time, at their scales, and
        no edit."""
        if params.edit is not None:
            raise UnsupportedRequest(
                ("init_image", "image edits are not served on the Neuron pool; send them to a GPU or CPU pool")
            )
        check_size(self.sizes, params.width, params.height)
        problems = fused_lora_problems(params.loras, self.fused_loras)
        if problems:
            raise LoraRefused("; ".join(problems))

    def default_strength(self, mode: EditMode) -> float:
        """No edit runs here (edit_modes is empty)."""
        raise UnsupportedRequest(("init_image", f"{mode} edits are not served on the Neuron pool"))

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image]:
        """Pad to the compiled batch of the batch's size, run once, and return only the real requests' images."""
        sizes = {(p.width, p.height) for p in batch}
        if len(sizes) != 1:  # the batcher groups by size; a mixed batch is a bug, not a request to serve
            raise ValueError(f"one batch holds several sizes: {size_list(sorted(sizes))}")
        (size,) = sizes
        check_size(self.sizes, *size)
        compiled = self._by_size[size]
        padded = pad_batch(batch, compiled.shape.batch_size)
        output = compiled.pipeline(**pipeline_arguments(padded, on_step, self.family))
        return list(output.images[: len(batch)])

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """One full batch on every compiled pipeline: each size is its own graph (`size` is one of them)."""
        for compiled in self.compiled:
            self.generate([warm_up_params(steps, compiled.shape.width, compiled.shape.height, self.family)])

    def describe(self) -> dict[str, Any]:
        """Compiled shapes and versions for /v1/info."""
        versions = {}
        for package in ("optimum-neuron", "torch-neuronx", "diffusers"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                versions[package] = "not installed"
        width, height = self.native_size
        return {
            "device": "neuron",
            "dtype": "compiled",
            "native_size": {"width": width, "height": height},
            "compiled_shapes": [c.shape.as_dict() for c in self.compiled],
            "loras_fused": [{"name": ref.name, "scale": ref.scale} for ref in self.fused_loras],
            "versions": versions,
        }


def find_compiled(root: Path, wanted: Sequence[ImageSize] | None, *, need_marker: bool) -> list[tuple[ImageSize, Path]]:
    """The `<W>x<H>/` folders under `root` to load, in the order of `wanted` (None: every complete one, by name).

    A folder counts once it holds a saved pipeline (model_index.json) and, where it was downloaded from the
    model store (`need_marker`), the compile's completion marker; a wanted size without one is an error that
    names the sizes there are.
    """
    complete: dict[ImageSize, Path] = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        try:
            size = ImageSize.parse(folder.name)
        except ValueError:
            continue
        if (folder / "model_index.json").is_file() and (not need_marker or (folder / COMPLETE_MARKER).is_file()):
            complete[size] = folder
    if wanted is None:
        if not complete:
            raise RuntimeError(
                f"{root} holds no compiled size folder (<W>x<H>/ with model_index.json"
                f"{' and ' + COMPLETE_MARKER if need_marker else ''}): compile with "
                "python -m app.model_store.neuron_compile compile ... --shape WxH"
            )
        return list(complete.items())
    missing = [size.key for size in wanted if size not in complete]
    if missing:
        there = ", ".join(size.key for size in complete) or "none"
        raise RuntimeError(
            f"NEURON_SHAPES asks for {', '.join(missing)}, which {root} holds no complete compiled pipeline for "
            f"(compiled there: {there}); compile it with --shape, or leave it out of NEURON_SHAPES"
        )
    return [(size, complete[size]) for size in wanted]


def compiled_tensor_parallel_size(folder: Path) -> int | None:
    """The tensor parallel size the UNet or transformer in `folder` was compiled for, where its config says."""
    for part in ("unet", "transformer"):
        section = _neuron_section(folder / part / "config.json")
        if section and section.get("tensor_parallel_size"):
            return int(section["tensor_parallel_size"])
    return None


def load_neuron_backend(settings: Settings) -> NeuronBackend:
    """Load the compiled pipeline of every served size (a local folder or an s3:// prefix) onto the NeuronCores."""
    if settings.model_id.startswith(BUILTIN_PREFIX):
        raise RuntimeError(
            f"MODEL_ID={settings.model_id} is not Neuron-compiled; point MODEL_ID at the compiled prefix that "
            "python -m app.model_store.neuron_compile wrote (a folder or an s3:// prefix with <W>x<H>/ folders)"
        )
    source = resolve_compiled_source(settings.model_id, settings.model_cache_dir, settings.neuron_sizes)
    if not isinstance(source, Path):
        raise RuntimeError(
            f"MODEL_ID={settings.model_id} is a hub id; the Neuron backend loads a folder or an s3:// prefix "
            "holding one <W>x<H>/ folder per compiled size"
        )
    folders = find_compiled(source, settings.neuron_sizes, need_marker=settings.model_id.startswith("s3://"))
    families = set()
    checked: list[tuple[Path, CompiledShape]] = []
    for size, folder in folders:
        try:
            family = family_of(folder)
            check_served_variant(folder, family)
        except UnknownFamily as exc:
            raise RuntimeError(str(exc)) from None
        families.add(family)
        fallback = CompiledShape(settings.neuron_batch_size, size.height, size.width)
        shape = read_compiled_shape(folder, fallback)
        if (shape.width, shape.height) != (size.width, size.height):
            raise RuntimeError(f"{folder} holds a pipeline compiled for {shape.width}x{shape.height}, not {size.key}")
        tensor_parallel = compiled_tensor_parallel_size(folder)
        wanted = settings.neuron_tensor_parallel_size
        if wanted is not None and tensor_parallel is not None and tensor_parallel != wanted:
            raise RuntimeError(
                f"NEURON_TENSOR_PARALLEL_SIZE={wanted}, but {folder} was compiled for tensor parallel {tensor_parallel}"
            )
        checked.append((folder, shape))
    if len(families) != 1:
        raise RuntimeError(
            f"the size folders under {source} hold models of several families: {sorted(f.name for f in families)}"
        )
    (family,) = families
    if settings.neuron_sizes is None:  # every compiled size: the family's default size first, where compiled
        checked.sort(key=lambda item: (item[1].width, item[1].height) != family.default_size)
    import optimum.neuron

    pipeline_class = getattr(optimum.neuron, pipeline_class_name(family))
    compiled = []
    for folder, shape in checked:
        # Each from_pretrained loads that size's components onto the NeuronCores (docs/serving.md, "Several
        # sizes per pod" says what that costs per family).
        pipeline = pipeline_class.from_pretrained(str(folder))
        pipeline.set_progress_bar_config(disable=True)
        compiled.append(CompiledPipeline(pipeline, shape))
    return NeuronBackend(compiled, family, fused_loras=settings.neuron_fused_loras)
