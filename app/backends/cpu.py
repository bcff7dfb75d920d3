"""The CPU backend: the laptop and CI path, fp32 diffusers."""

from __future__ import annotations

from app.backends.diffusers_backend import DiffusersBackend, load_diffusers_pipeline
from app.backends.lora_slots import lora_slots
from app.model_store.source import resolve_model_source
from app.settings import Settings


def load_cpu_backend(settings: Settings) -> DiffusersBackend:
    """Load the model in fp32 on the CPU (bf16 on CPUs is slow or unsupported for many ops)."""
    source = resolve_model_source(settings.model_id, settings.model_cache_dir)
    pipeline, family = load_diffusers_pipeline(source)
    return DiffusersBackend(
        pipeline, family, name="cpu", max_batch_size=settings.max_batch_size, lora_slots=lora_slots(pipeline, settings)
    )
