"""The UI handler relays every denoising step to Gradio's progress bar and maps errors to messages."""

from __future__ import annotations

import asyncio

import gradio as gr
import pytest

from app.service import GenerationService
from app.settings import load_settings
from app.ui import _generate_with_progress
from tests.app.fakes import FakeBackend


class RecordingProgress:
    def __init__(self):
        self.calls: list[tuple[object, str | None]] = []

    def __call__(self, progress, desc=None, total=None, unit="steps"):
        self.calls.append((progress, desc))


async def _run(fields: dict, progress: RecordingProgress, backend: FakeBackend):
    service = GenerationService(load_settings(max_steps=8, default_steps=2, ui=False), lambda _s: backend)
    await service.start()
    try:
        return await _generate_with_progress(service, fields, progress)
    finally:
        await service.stop()


def test_progress_goes_from_queued_through_every_step():
    progress = RecordingProgress()
    image, caption = asyncio.run(_run({"prompt": "a fox", "steps": 4, "seed": 3}, progress, FakeBackend(delay_s=0.01)))
    assert image.size == (64, 64)
    assert "seed 3" in caption and "4 steps" in caption
    assert progress.calls[0] == ((0, 4), "waiting in the queue")
    assert progress.calls[1:] == [((i, 4), "denoising") for i in range(1, 5)]


def test_out_of_bounds_input_is_a_gradio_error_with_the_reason():
    with pytest.raises(gr.Error, match="steps must be between 1 and 8"):
        asyncio.run(_run({"prompt": "a fox", "steps": 9}, RecordingProgress(), FakeBackend()))


def test_a_pipeline_failure_reaches_the_user_as_an_error_with_an_id():
    with pytest.raises(gr.Error, match=r"Internal error while generating \(error id [0-9a-f]{12}\)"):
        asyncio.run(_run({"prompt": "explode", "steps": 2}, RecordingProgress(), FakeBackend()))


def test_each_ui_generation_is_one_json_log_line(caplog):
    caplog.set_level("INFO", logger="app.ui")
    asyncio.run(_run({"prompt": "a fox", "steps": 2, "seed": 1}, RecordingProgress(), FakeBackend()))
    (record,) = [r for r in caplog.records if r.name == "app.ui" and r.getMessage() == "request"]
    assert (record.path, record.status, record.backend, record.batch_size) == ("ui:generate", 200, "cpu", 1)
    assert record.latency_ms > 0
