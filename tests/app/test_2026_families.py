"""FLUX.2 [klein], Z-Image and Qwen-Image folders (tiny, random weights) given as MODEL_ID: detected from their
model_index.json and served by the real app over HTTP, the official `openai` client and the UI's `gradio_client`."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
from gradio_client import Client
from PIL import Image

from app.backends.cpu import load_cpu_backend
from app.models.families import UnknownFamily
from app.settings import load_settings
from tests.app.live_server import serve
from tests.support.family_folders import FAMILY_SETTINGS, saved_folder


@dataclass(frozen=True)
class Expected:
    """What a tiny folder of one family must show: its family, its tiny native size, a second size within bounds."""

    builtin: str
    family: str
    native: tuple[int, int]
    other: tuple[int, int]
    guidance: bool


FAMILIES = [
    # 256 px VAEs: the families' 1024 px sizes scaled by a quarter.
    Expected("builtin:tiny-flux2-klein", "flux2-klein", (256, 256), (336, 192), guidance=False),
    Expected("builtin:tiny-z-image", "z-image", (256, 256), (192, 256), guidance=False),
    # The tiny VAE records 128 px; Qwen-Image's 1664x928 scaled by 128/1328 is 160x96.
    Expected("builtin:tiny-qwen-image", "qwen-image", (128, 128), (160, 96), guidance=True),
]


@pytest.fixture(scope="module", params=FAMILIES, ids=lambda e: e.family)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Expected]]:
    expected: Expected = request.param
    root = tmp_path_factory.mktemp(expected.family)
    folder = saved_folder(expected.builtin, root)
    with serve(root, model_id=str(folder), **FAMILY_SETTINGS) as live:
        yield live.url, expected


def _png_bytes(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return image


def test_the_folder_is_detected_as_its_family(served: tuple[str, Expected]) -> None:
    url, expected = served
    family = httpx.get(f"{url}/v1/info", timeout=30).json()["family"]
    assert family["name"] == expected.family
    assert family["guidance"] is expected.guidance
    assert family["size_bounds"]["multiple_of"] == 16  # 2x2 packed latents over an 8x VAE
    assert family["sizes"][0] == {"width": expected.native[0], "height": expected.native[1]}


def test_rest_generate_draws_the_native_size_and_another_size(served: tuple[str, Expected]) -> None:
    url, expected = served
    with httpx.Client(base_url=url, timeout=120) as client:
        native = client.post("/v1/generate", json={"prompt": "a lighthouse", "steps": 2, "seed": 1})
        assert native.status_code == 200, native.text
        assert _png_bytes(native.content).size == expected.native
        width, height = expected.other
        other = client.post(
            "/v1/generate", json={"prompt": "a lighthouse", "steps": 2, "width": width, "height": height}
        )
        assert other.status_code == 200, other.text
        assert _png_bytes(other.content).size == expected.other


def test_the_openai_client_generates_an_image(served: tuple[str, Expected]) -> None:
    url, expected = served
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    width, height = expected.other
    answer = sdk.images.generate(
        prompt="a fox", size=f"{width}x{height}", response_format="b64_json", extra_body={"steps": 2}
    )
    assert answer.data is not None and answer.data[0].b64_json is not None
    assert _png_bytes(base64.b64decode(answer.data[0].b64_json)).size == expected.other


def test_the_ui_generates_an_image(served: tuple[str, Expected], tmp_path: Path) -> None:
    url, expected = served
    client = Client(url, verbose=False, download_files=str(tmp_path))
    path, caption = client.predict("a lighthouse", steps=2, seed=5, api_name="/generate")
    assert Image.open(path).size == expected.native
    assert caption.startswith(f"seed 5 · {expected.native[0]}x{expected.native[1]}")


def test_guidance_goes_where_the_family_takes_it(served: tuple[str, Expected]) -> None:
    url, expected = served
    body = {"prompt": "a lighthouse", "steps": 2, "guidance_scale": 3.0, "negative_prompt": "fog"}
    response = httpx.post(f"{url}/v1/generate", json=body, timeout=120)
    if expected.guidance:  # Qwen-Image: true classifier-free guidance with a negative prompt
        assert response.status_code == 200, response.text
    else:  # distilled: a readable refusal, not a silently ignored field
        assert response.status_code == 422
        assert "guidance_scale does not apply" in response.text


def test_an_undistilled_klein_folder_is_refused(tmp_path: Path) -> None:
    """[klein] Base shares the distilled model's pipeline class; model_index.json's is_distilled gives it away."""
    folder = saved_folder("builtin:tiny-flux2-klein", tmp_path)
    index = folder / "model_index.json"
    index.write_text(json.dumps({**json.loads(index.read_text()), "is_distilled": False}))
    settings = load_settings(backend="cpu", model_id=str(folder), model_cache_dir=tmp_path / "cache")
    with pytest.raises(UnknownFamily, match="not step-distilled"):
        load_cpu_backend(settings)
