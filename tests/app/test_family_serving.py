"""SDXL- and FLUX.1-schnell-shaped diffusers folders given as MODEL_ID, served by the real app over HTTP."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from app.backends.cpu import load_cpu_backend
from app.models.families import UnknownFamily
from app.settings import load_settings
from tests.app.live_server import LiveServer, serve
from tests.support.family_folders import FAMILY_SETTINGS, saved_folder


@pytest.fixture(scope="module")
def sdxl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("sdxl")
    folder = saved_folder("builtin:tiny-sdxl", root)
    with (
        serve(root, model_id=str(folder), **FAMILY_SETTINGS) as live,
        httpx.Client(base_url=live.url, timeout=120) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def flux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, LiveServer]]:
    root = tmp_path_factory.mktemp("flux")
    folder = saved_folder("builtin:tiny-flux", root)
    with (
        serve(root, model_id=str(folder), jobs="local", jobs_dir=root / "jobs", **FAMILY_SETTINGS) as live,
        httpx.Client(base_url=live.url, timeout=120) as client,
    ):
        yield client, live


def _png(response: httpx.Response) -> Image.Image:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    return Image.open(io.BytesIO(response.content))


def test_sdxl_folder_reports_its_family_sizes_and_defaults(sdxl: httpx.Client) -> None:
    family = sdxl.get("/v1/info").json()["family"]
    assert family["name"] == "sdxl"
    assert family["guidance"] is True and family["negative_prompt"] is True
    assert family["default_guidance_scale"] == 5.0
    assert family["default_steps"] == 8  # SDXL's 30, capped at the tests' MAX_STEPS
    # SDXL's trained buckets scaled to the tiny model's 128 px: 896x1152 -> 112x144, and so on.
    assert family["sizes"][:3] == [
        {"width": 128, "height": 128},
        {"width": 112, "height": 144},
        {"width": 144, "height": 112},
    ]
    assert len(family["sizes"]) == 9
    # SDXL's 1536 px bound scaled to 128 px is 192; MIN_SIZE (64) is the tighter lower bound.
    assert family["size_bounds"] == {"min": 64, "max": 192, "multiple_of": 8}


def test_sdxl_folder_draws_a_portrait_with_guidance_and_a_negative_prompt(sdxl: httpx.Client) -> None:
    body = {
        "prompt": "a lighthouse",
        "negative_prompt": "fog",
        "guidance_scale": 6.0,
        "width": 112,
        "height": 144,
        "steps": 2,
        "seed": 3,
    }
    assert _png(sdxl.post("/v1/generate", json=body)).size == (112, 144)


def test_sdxl_folder_serves_its_native_size_and_capped_default_steps(sdxl: httpx.Client) -> None:
    # SDXL's 30 default steps are capped at the tests' MAX_STEPS (8): a request naming none still runs.
    response = sdxl.post("/v1/generate", json={"prompt": "a lighthouse"})
    assert _png(response).size == (128, 128)


def test_flux_folder_reports_a_guidance_distilled_family(flux: tuple[httpx.Client, LiveServer]) -> None:
    client, _ = flux
    info = client.get("/v1/info").json()
    assert info["family"]["name"] == "flux"
    assert info["family"]["guidance"] is False and info["family"]["negative_prompt"] is False
    assert info["family"]["default_guidance_scale"] is None
    assert info["family"]["default_steps"] == 4  # schnell's few steps, not a Stable Diffusion default
    assert info["family"]["size_bounds"] == {"min": 64, "max": 384, "multiple_of": 16}
    assert all(s["width"] % 16 == 0 and s["height"] % 16 == 0 for s in info["family"]["sizes"])


def test_flux_folder_draws_the_asked_size_in_four_steps(flux: tuple[httpx.Client, LiveServer]) -> None:
    client, live = flux
    batches_before = sum(live.service.batcher.stats.batch_sizes.values())
    image = _png(client.post("/v1/generate", json={"prompt": "a lighthouse", "width": 192, "height": 256, "seed": 1}))
    assert image.size == (192, 256)
    assert sum(live.service.batcher.stats.batch_sizes.values()) == batches_before + 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"guidance_scale": 3.5}, "guidance_scale does not apply to FLUX.1-schnell (guidance-distilled)"),
        ({"negative_prompt": "fog"}, "negative_prompt does not apply to FLUX.1-schnell"),
        ({"width": 200}, "width must be a multiple of 16 between 64 and 384 for this FLUX.1-schnell model; got 200"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/generate", "/v1/jobs"])
def test_flux_folder_refuses_what_the_family_cannot_do(
    flux: tuple[httpx.Client, LiveServer], extra: dict[str, object], message: str, path: str
) -> None:
    client, _ = flux
    response = client.post(path, json={"prompt": "a lighthouse", **extra})
    assert response.status_code == 422
    # Every 422 names its field in `detail`, as a validation error's does (docs/api.md, ErrorResponse).
    body = response.json()
    (problem,) = body["detail"]
    field = next(iter(extra))
    assert problem["field"] == field and problem["message"].startswith(message), body
    assert message in body["error"]


def test_two_problems_are_two_details(flux: tuple[httpx.Client, LiveServer]) -> None:
    client, _ = flux
    response = client.post("/v1/generate", json={"prompt": "a lighthouse", "width": 200, "height": 72})
    assert response.status_code == 422
    assert [problem["field"] for problem in response.json()["detail"]] == ["width", "height"]


def test_a_folder_of_an_unserved_pipeline_stops_the_load_naming_the_served_ones(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text('{"_class_name": "StableCascadeCombinedPipeline"}')
    settings = load_settings(backend="cpu", model_id=str(tmp_path), model_cache_dir=tmp_path / "cache")
    with pytest.raises(UnknownFamily, match="StableDiffusionXLPipeline"):
        load_cpu_backend(settings)


def test_a_guidance_embedded_flux_folder_is_refused(tmp_path: Path) -> None:
    """FLUX.1-dev shares schnell's pipeline class; its transformer config gives it away."""
    import json

    folder = saved_folder("builtin:tiny-flux", tmp_path)
    config_path = folder / "transformer" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "guidance_embeds": True}))
    settings = load_settings(backend="cpu", model_id=str(folder), model_cache_dir=tmp_path / "cache")
    with pytest.raises(UnknownFamily, match="embeds guidance"):
        load_cpu_backend(settings)
