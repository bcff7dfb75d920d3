"""Stand-in backends for tests that exercise the service around the model, not the model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from PIL import Image

from app.backends.base import IMAGE_TO_IMAGE, INPAINT, EditMode, GenerationParams, StepCallback
from app.models.families import SD


class FakeBackend:
    """Returns a solid image per request; records every batch; fails on the prompt "explode"."""

    name = "cpu"
    family = SD
    bounds = SD.bounds
    edit_modes: frozenset[EditMode] = frozenset({IMAGE_TO_IMAGE, INPAINT})  # as the CPU backend of SD

    def __init__(self, max_batch_size: int = 8, native_size: tuple[int, int] = (64, 64), delay_s: float = 0.0):
        self.max_batch_size = max_batch_size
        self.native_size = native_size
        self.sizes = (native_size,)
        self.delay_s = delay_s
        self.batches: list[list[GenerationParams]] = []
        self.release = threading.Event()
        self.release.set()

    def check(self, params: GenerationParams) -> None:
        pass

    def generate(self, batch: Sequence[GenerationParams], on_step: StepCallback | None = None) -> list[Image.Image]:
        self.release.wait(timeout=30)
        self.batches.append(list(batch))
        if any(p.prompt == "explode" for p in batch):
            raise RuntimeError("simulated pipeline failure")
        for step in range(batch[0].steps):
            threading.Event().wait(self.delay_s)
            if on_step:
                on_step(step + 1, batch[0].steps)
        return [Image.new("RGB", (p.width, p.height), (p.seed % 256, 0, 0)) for p in batch]

    def default_strength(self, mode: EditMode) -> float:
        return 0.8  # SD's image-to-image default in diffusers 0.42

    def warm_up(self, steps: int, size: tuple[int, int]) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"device": "fake", "compiled_shapes": None, "versions": {}}


def params(seed: int = 0, width: int = 64, steps: int = 2, prompt: str = "p") -> GenerationParams:
    return GenerationParams(prompt, "", steps, 7.5, width, 64, seed)


class RecordingNeuronPipeline:
    """Stands in for a compiled Neuron pipeline's call signature; records what it was given and returns
    images of the (width, height) it stands for."""

    def __init__(self, size: tuple[int, int] = (64, 64)):
        self.size = size
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        images = [Image.new("RGB", self.size, (i, 0, 0)) for i in range(len(kwargs["prompt"]))]
        return type("Output", (), {"images": images})()
