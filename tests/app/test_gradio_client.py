"""The UI's public endpoint through the real `gradio_client`, as a program using the UI would call it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gradio_client import Client
from PIL import Image

from tests.app.held import wait_until
from tests.app.native_server import NATIVE_SIZE, GatedServer, serve_gated


@pytest.fixture(scope="module")
def ready_native(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedServer]:
    with serve_gated(tmp_path_factory.mktemp("native")) as server:
        server.load.set()
        wait_until(lambda: server.service.ready)
        yield server


def test_view_api_lists_only_generate_with_named_optional_parameters(ready_native: GatedServer):
    api = Client(ready_native.url, verbose=False).view_api(print_info=False, return_format="dict")
    assert set(api["named_endpoints"]) == {"/generate"}  # no internal handlers
    assert api["unnamed_endpoints"] == {}
    generate = api["named_endpoints"]["/generate"]
    parameters = {p["parameter_name"]: p for p in generate["parameters"]}
    assert list(parameters) == ["prompt", "negative_prompt", "steps", "guidance_scale", "width", "height", "seed"]
    assert [name for name, p in parameters.items() if not p["parameter_has_default"]] == ["prompt"]
    # Empty sizes mean the model's native size, as in the HTTP API; an empty seed means random.
    assert {name: parameters[name]["parameter_default"] for name in ("negative_prompt", "width", "height", "seed")} == {
        "negative_prompt": None,
        "width": None,
        "height": None,
        "seed": None,
    }
    assert [r["label"] for r in generate["returns"]] == ["Image", "Caption"]


def test_a_prompt_alone_gives_an_image_of_the_models_native_size(ready_native: GatedServer, tmp_path: Path):
    client = Client(ready_native.url, verbose=False, download_files=str(tmp_path))
    first_path, caption = client.predict("a lighthouse", api_name="/generate")
    _, second_caption = client.predict("a lighthouse", api_name="/generate")
    assert Image.open(first_path).size == NATIVE_SIZE
    assert f"{NATIVE_SIZE[0]}x{NATIVE_SIZE[1]}" in caption
    assert caption.split(" · ")[0] != second_caption.split(" · ")[0]  # a random seed each time


def test_named_values_and_bad_values_through_the_client(ready_native: GatedServer, tmp_path: Path):
    client = Client(ready_native.url, verbose=False, download_files=str(tmp_path))
    path, caption = client.predict("a lighthouse", width=72, height=80, seed=7, api_name="/generate")
    assert Image.open(path).size == (72, 80)
    assert caption.startswith("seed 7 · 72x80")
    with pytest.raises(Exception, match="invalid request: steps: Input should be a valid integer"):
        client.predict("a lighthouse", steps="many", api_name="/generate")
