"""The CUDA backend: diffusers in bf16/fp16 with PyTorch SDPA attention on an NVIDIA GPU.

Two hooks matter for the speed work: `prepare_pipeline_for_cuda` is the one place that turns a
loaded pipeline into a CUDA one, and `CudaBackend.warm_up` is the one warm-up: it runs every shape
the batcher can send (each batch size at the default size), so compiled kernels exist before
readiness turns green.
"""

from __future__ import annotations

from typing import Any

from app.backends.base import GenerationParams
from app.backends.diffusers_backend import DiffusersBackend, load_diffusers_pipeline
from app.model_source import resolve_model_source
from app.settings import CudaDtype, Settings


def torch_dtype(name: CudaDtype) -> Any:  # a torch.dtype
    """The torch dtype for a CUDA_DTYPE setting."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def prepare_pipeline_for_cuda(pipeline: Any, settings: Settings) -> Any:
    """Move a loaded pipeline to the GPU in CUDA_DTYPE with SDPA attention; return it."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    pipeline = pipeline.to("cuda", torch_dtype(settings.cuda_dtype))
    # diffusers picks SDPA by default on torch 2; set it explicitly so a config cannot downgrade it.
    pipeline.unet.set_attn_processor(AttnProcessor2_0())
    pipeline.vae.set_attn_processor(AttnProcessor2_0())
    return pipeline


def warm_up_batch_sizes(settings: Settings) -> list[int]:
    """Every batch size the batcher can form; each is a distinct shape for compiled kernels."""
    return list(range(1, settings.max_batch_size + 1))


class CudaBackend(DiffusersBackend):
    """The diffusers backend on a GPU, with a warm-up over every served shape."""

    def __init__(self, pipeline: Any, settings: Settings):
        super().__init__(pipeline, name="cuda", max_batch_size=settings.max_batch_size)
        self.batch_sizes = warm_up_batch_sizes(settings)

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        """Run each batch size 1..MAX_BATCH_SIZE once at `size` and wait for the GPU to finish."""
        import torch

        width, height = size
        for batch_size in self.batch_sizes:
            self.generate([GenerationParams("warm-up", "", steps, 7.5, width, height, 0)] * batch_size)
        torch.cuda.synchronize()

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
    pipeline = load_diffusers_pipeline(str(source), dtype=torch_dtype(settings.cuda_dtype))
    return CudaBackend(prepare_pipeline_for_cuda(pipeline, settings), settings)
