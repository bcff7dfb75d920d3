"""Per-stage timing of a diffusers pipeline: text encoder, UNet (per step) and VAE decode.

Hooks wrap the pipeline's components from the outside (around a compiled module, never inside its
graph) and, on CUDA, synchronize before reading the clock, so each stage's figure is its GPU time.
That synchronization stops the CPU from queueing work ahead, so stage passes are run separately
from the end-to-end timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StageTimes:
    """Seconds spent in each stage during one or more pipeline calls, and how often each ran."""

    seconds: dict[str, float] = field(default_factory=lambda: {"text_encoder": 0.0, "unet": 0.0, "vae_decode": 0.0})
    calls: dict[str, int] = field(default_factory=lambda: {"text_encoder": 0, "unet": 0, "vae_decode": 0})


def _clock(device: Any) -> Callable[[], float]:
    import torch

    if getattr(device, "type", None) == "cuda":

        def synced() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return synced
    return time.perf_counter


@contextmanager
def stage_timer(pipe: Any) -> Iterator[StageTimes]:
    """Time the pipeline's stages while inside the block; the pipeline is restored on exit."""
    times = StageTimes()
    now = _clock(pipe.device)
    started: dict[str, float] = {}
    handles = []

    def hook(stage: str, module: Any) -> None:
        def before(*_: object) -> None:
            started[stage] = now()

        def after(*_: object) -> None:
            times.seconds[stage] += now() - started.pop(stage)
            times.calls[stage] += 1

        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after))

    hook("text_encoder", pipe.text_encoder)
    hook("unet", pipe.unet)

    # The pipeline calls vae.decode, not vae.forward, so that method is wrapped instead; the
    # wrapper shadows the (possibly compiled) bound method and is removed on exit.
    vae = pipe.vae
    had_own_decode = "decode" in vae.__dict__
    inner_decode = vae.decode

    def timed_decode(*args: object, **kwargs: object) -> object:
        begin = now()
        result = inner_decode(*args, **kwargs)
        times.seconds["vae_decode"] += now() - begin
        times.calls["vae_decode"] += 1
        return result

    vae.decode = timed_decode
    try:
        yield times
    finally:
        for handle in handles:
            handle.remove()
        if had_own_decode:
            vae.decode = inner_decode
        else:
            del vae.decode
