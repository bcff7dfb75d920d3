"""The CUDA backend: diffusers on an NVIDIA GPU, with the speed steps of `cuda_tuning`.

`prepare_pipeline_for_cuda` is the one place that turns a loaded pipeline into a CUDA one
(dtype, SDPA, fused QKV, channels-last, torch.compile: each switchable by a CUDA_* setting), and
`CudaBackend.warm_up` runs every shape the batcher can send, so compiled kernels exist before
readiness turns green.
"""

from __future__ import annotations

from typing import Any

from app.backends.base import family_arguments
from app.backends.cuda_tuning import WARM_UP_STEPS, apply_speed_settings, load_dtype, served_shapes, warm_up
from app.backends.diffusers_backend import DiffusersBackend, load_diffusers_pipeline
from app.backends.lora_slots import lora_slots
from app.model_store.source import resolve_model_source
from app.models.families import Family
from app.settings import Settings


def prepare_pipeline_for_cuda(pipeline: Any, settings: Settings) -> Any:
    """Move a loaded pipeline to the GPU in CUDA_DTYPE and apply the CUDA_* speed steps; return it."""
    return apply_speed_settings(pipeline.to("cuda", load_dtype(settings, "cuda")), settings)


class CudaBackend(DiffusersBackend):
    """The diffusers backend on a GPU, with a warm-up over every served shape."""

    def __init__(self, pipeline: Any, family: Family, settings: Settings):
        super().__init__(
            pipeline,
            family,
            name="cuda",
            max_batch_size=settings.max_batch_size,
            lora_slots=lora_slots(pipeline, settings),
        )
        self.settings = settings

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """Run each batch size 1..MAX_BATCH_SIZE once at `size` (width, height) on this thread."""
        width, height = size
        warm_up(
            self.pipeline,
            served_shapes(self.settings, height, width),
            steps=max(steps, WARM_UP_STEPS),
            arguments=family_arguments(self.family, None),
        )

    def describe(self) -> dict[str, Any]:
        """The diffusers facts plus the GPU's name."""
        import torch

        return {**super().describe(), "gpu": torch.cuda.get_device_name()}


def load_cuda_backend(settings: Settings) -> CudaBackend:
    """Load the model, prepare it for the GPU and wrap it as the "cuda" backend."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("BACKEND=cuda but torch sees no CUDA device")
    source = resolve_model_source(settings.model_id, settings.model_cache_dir)
    pipeline, family = load_diffusers_pipeline(source, dtype=load_dtype(settings, "cuda"))
    return CudaBackend(prepare_pipeline_for_cuda(pipeline, settings), family, settings)
