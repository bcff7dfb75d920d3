"""Edits in the batcher: an edit never shares a pipeline call with text to image, nor with another mode or
strength; edits of different images that agree on those do share one, and each gets its own image."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from PIL import Image

from app.backends.base import EditInput
from app.backends.selection import load_backend
from app.batching import ACROSS_BATCH_MAX_ABS, Batcher
from app.settings import load_settings
from tests.app.fakes import FakeBackend, params


def edit(colour: tuple[int, int, int], strength: float, masked: bool = False) -> EditInput:
    mask = Image.new("L", (64, 64), 255) if masked else None
    return EditInput(Image.new("RGB", (64, 64), colour), mask, strength)


def test_edits_are_grouped_by_mode_and_strength():
    backend = FakeBackend()
    requests = [
        params(seed=0),
        dataclasses.replace(params(seed=1), edit=edit((255, 0, 0), 0.5)),
        dataclasses.replace(params(seed=2), edit=edit((0, 255, 0), 0.5)),  # another image, same strength: shares
        dataclasses.replace(params(seed=3), edit=edit((255, 0, 0), 0.8)),
        dataclasses.replace(params(seed=4), edit=edit((255, 0, 0), 0.5, masked=True)),
        params(seed=5),
    ]

    async def run() -> None:
        batcher = Batcher(backend, max_batch_size=8, batch_wait_s=0.2, queue_size=8)
        batcher.start()
        backend.release.clear()  # hold the first call, so that the others are all queued behind it
        try:
            waiting = asyncio.gather(*(batcher.submit(p, 10) for p in requests))
            while batcher.in_flight < len(requests):
                await asyncio.sleep(0.01)
            backend.release.set()
            await waiting
        finally:
            await batcher.stop()

    asyncio.run(run())
    seeds = sorted(sorted(p.seed for p in batch) for batch in backend.batches)
    # Text to image apart from the edits, edits by mode and strength; the first call may have gone before the
    # sixth request was queued.
    assert seeds in ([[0, 5], [1, 2], [3], [4]], [[0], [1, 2], [3], [4], [5]])
    for batch in backend.batches:
        assert len({p.batch_key for p in batch}) == 1


def test_each_edit_in_a_shared_call_gets_its_own_image(tmp_path: Path):
    settings = load_settings(backend="cpu", model_cache_dir=tmp_path, jobs="off")
    backend = load_backend(settings)
    red = dataclasses.replace(params(seed=7, steps=4), edit=edit((255, 0, 0), 0.6))
    blue = dataclasses.replace(params(seed=7, steps=4), edit=edit((0, 0, 255), 0.6))
    together = backend.generate([red, blue])
    alone = [backend.generate([red])[0], backend.generate([blue])[0]]
    assert together[0].tobytes() != together[1].tobytes()
    for shared, single in zip(together, alone, strict=True):
        diff = max(abs(a - b) for a, b in zip(shared.tobytes(), single.tobytes(), strict=True))
        assert diff <= ACROSS_BATCH_MAX_ABS
