"""The built-in model follows the prompt, and a batch never mixes prompts up between requests."""

from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
from PIL import Image

from app.batching import ACROSS_BATCH_MAX_ABS, ACROSS_BATCH_MEAN_ABS
from app.models.tokenizer_files import load_tokenizer, write_tokenizer_files
from tests.app.live_server import LiveServer

PROMPTS = ["a red fox in the snow", "completely different words", "a lighthouse at dusk", "an empty blue room"]


def pixels(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"), dtype=np.int16)


def within_batch_tolerance(a: np.ndarray, b: np.ndarray) -> bool:
    difference = np.abs(a - b)
    return int(difference.max()) <= ACROSS_BATCH_MAX_ABS and float(difference.mean()) <= ACROSS_BATCH_MEAN_ABS


def body(prompt: str) -> dict[str, object]:
    return {"prompt": prompt, "steps": 2, "seed": 11, "width": 64, "height": 64}


def test_the_tokenizer_gives_different_prompts_different_ids(tmp_path):
    write_tokenizer_files(tmp_path)
    tokenizer = load_tokenizer(tmp_path, 77)
    first, second = (tokenizer(p).input_ids for p in PROMPTS[:2])
    assert first != second
    assert len(set(first)) > 5  # words, not one unknown token repeated


def test_different_prompts_give_different_images(live_service: LiveServer):
    with httpx.Client(base_url=live_service.url, timeout=60) as client:
        images = [pixels(client.post("/v1/generate", json=body(p))) for p in PROMPTS[:2]]
    assert not within_batch_tolerance(*images)


def test_a_batch_never_mixes_up_prompts_between_requests(live_service: LiveServer):
    async def together() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=live_service.url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/v1/generate", json=body(p)) for p in PROMPTS))

    with httpx.Client(base_url=live_service.url, timeout=60) as client:
        alone = [pixels(client.post("/v1/generate", json=body(p))) for p in PROMPTS]
    batched = asyncio.run(together())
    assert max(int(r.headers["x-batch-size"]) for r in batched) > 1  # they did share a pipeline call
    for index, response in enumerate(batched):
        image = pixels(response)
        assert within_batch_tolerance(image, alone[index]), PROMPTS[index]
        others = [alone[j] for j in range(len(PROMPTS)) if j != index]
        assert not any(within_batch_tolerance(image, other) for other in others)
