"""The CUDA backend: diffusers in bf16/fp16 with PyTorch SDPA attention on an NVIDIA GPU.

Two hooks matter for the speed work: `prepare_pipeline_for_cuda` is the one place that turns a
loaded pipeline into a CUDA one, and `warm_up_shapes` lists every shape the warm-up runs, so a
compiled graph exists for each batch size before readiness turns green.
"""

from __future__ import annotations

from typing import Any

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


def load_cuda_backend(settings: Settings) -> DiffusersBackend:
    """Load the model, prepare it for the GPU and wrap it as the "cuda" backend."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("BACKEND=cuda but torch sees no CUDA device")
    source = resolve_model_source(settings.model_id, settings.model_cache_dir)
    pipeline = load_diffusers_pipeline(str(source), dtype=torch_dtype(settings.cuda_dtype))
    pipeline = prepare_pipeline_for_cuda(pipeline, settings)
    return DiffusersBackend(
        pipeline,
        name="cuda",
        max_batch_size=settings.max_batch_size,
        warm_up_batch_sizes=warm_up_batch_sizes(settings),
    )
