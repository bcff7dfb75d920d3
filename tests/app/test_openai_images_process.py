"""The Done-when of the Images API as `make run` serves it: `python -m app` as a process with its defaults
(the built-in model, the local jobs store, UI on), called by the official `openai` client."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image

from tests.support.app_process import run_app


def test_make_run_serves_the_images_api_to_the_openai_client(tmp_path: Path):
    env = {"HOST": "127.0.0.1", "MODEL_CACHE_DIR": str(tmp_path / "cache")}
    with run_app(env, ready_timeout_s=180, log=tmp_path / "app.log") as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused-locally", max_retries=0, timeout=300)
        answer = client.images.generate(prompt="a lighthouse at dusk", size="128x192", response_format="b64_json")
        image = Image.open(io.BytesIO(base64.b64decode(answer.data[0].b64_json)))
        assert (image.format, image.size) == ("PNG", (128, 192))

        linked = client.images.generate(prompt="a fox", size="64x64", response_format="url")
        fetched = httpx.get(linked.data[0].url, timeout=30)
        assert fetched.status_code == 200 and Image.open(io.BytesIO(fetched.content)).size == (64, 64)

        with pytest.raises(openai.BadRequestError) as caught:
            client.images.generate(prompt="a fox", size="5000x5000")
        assert "size 5000x5000 cannot be served" in caught.value.message and caught.value.param == "size"
