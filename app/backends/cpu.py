"""The CPU backend: the laptop and CI path, fp32 diffusers."""

from __future__ import annotations

from app.backends.diffusers_backend import DiffusersBackend, denoiser, load_diffusers_pipeline
from app.backends.lora_slots import lora_slots
from app.backends.step_cache import apply_step_cache
from app.model_store.source import resolve_model_source
from app.settings import Settings


def load_cpu_backend(settings: Settings) -> DiffusersBackend:
    """Load the model in fp32 on the CPU (bf16 on CPUs is slow or unsupported for many ops).

    Of the speed settings only the step cache applies here: it is plain torch, and it skips work on any device.
    """
    source = resolve_model_source(settings.model_id, settings.model_cache_dir)
    pipeline, family = load_diffusers_pipeline(source)
    if settings.cuda_step_cache:
        apply_step_cache(denoiser(pipeline), settings.cuda_step_cache_threshold)
    return DiffusersBackend(
        pipeline, family, name="cpu", max_batch_size=settings.max_batch_size, lora_slots=lora_slots(pipeline, settings)
    )
