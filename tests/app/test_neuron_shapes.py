"""Several compiled sizes per Neuron pod: the real loader finds one compiled pipeline per `<W>x<H>/` folder,
and the real HTTP server routes each request to the pipeline compiled for its size.

optimum-neuron cannot be installed here, so `optimum.neuron` is a stand-in module whose pipeline classes load
a recording pipeline per folder (returning images of that folder's size); everything else is the service's own.
"""

from __future__ import annotations

import io
import json
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from app.backends.neuron import find_compiled, load_neuron_backend
from app.settings import load_settings
from common.model_store.layout import COMPLETE_MARKER, ImageSize
from tests.app.fakes import RecordingNeuronPipeline
from tests.app.live_server import serve

SQUARE, PORTRAIT, LANDSCAPE = "64x64", "64x96", "96x64"


def write_compiled(
    root: Path, sizes: list[str], pipeline_class: str = "StableDiffusionXLPipeline", **extra: Any
) -> Path:
    """Size folders shaped like neuron_compile's output: a saved pipeline (model_index.json, UNet config)."""
    for key in sizes:
        size = ImageSize.parse(key)
        folder = root / key
        (folder / "unet").mkdir(parents=True)
        (folder / "model_index.json").write_text(json.dumps({"_class_name": pipeline_class}))
        neuron = {"static_height": size.height // 8, "static_width": size.width // 8, **extra}
        (folder / "unet" / "config.json").write_text(json.dumps({"neuron": neuron}))
        (folder / COMPLETE_MARKER).write_text("{}")
    return root


class StandInOptimumNeuron:
    """`optimum.neuron` with the three pipeline classes; each load is recorded with the class that made it."""

    def __init__(self) -> None:
        self.loaded: dict[str, tuple[str, RecordingNeuronPipeline]] = {}
        module = types.ModuleType("optimum.neuron")
        for class_name in ("NeuronStableDiffusionPipeline", "NeuronStableDiffusionXLPipeline", "NeuronFluxPipeline"):
            setattr(module, class_name, self._pipeline_class(class_name))
        parent = types.ModuleType("optimum")
        parent.neuron = module  # type: ignore[attr-defined]
        self.modules = {"optimum": parent, "optimum.neuron": module}

    def _pipeline_class(self, class_name: str) -> type:
        loaded = self.loaded

        class StandIn:
            @classmethod
            def from_pretrained(cls, path: str) -> RecordingNeuronPipeline:
                size = ImageSize.parse(Path(path).name)
                pipeline = RecordingNeuronPipeline((size.width, size.height))
                pipeline.set_progress_bar_config = lambda **kwargs: None  # type: ignore[attr-defined]
                loaded[size.key] = (class_name, pipeline)
                return pipeline

        return StandIn


@pytest.fixture
def optimum_neuron(monkeypatch) -> StandInOptimumNeuron:
    stand_in = StandInOptimumNeuron()
    for name, module in stand_in.modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return stand_in


@pytest.fixture(scope="module")
def three_sizes(tmp_path_factory):
    stand_in = StandInOptimumNeuron()
    saved = {name: sys.modules.get(name) for name in stand_in.modules}
    sys.modules.update(stand_in.modules)
    root = write_compiled(tmp_path_factory.mktemp("compiled"), [SQUARE, PORTRAIT, LANDSCAPE])
    try:
        with serve(
            tmp_path_factory.mktemp("cache"),
            loader=load_neuron_backend,
            ui=False,
            backend="neuron",
            model_id=str(root),
            neuron_shapes=f"{SQUARE},{PORTRAIT},{LANDSCAPE}",
            neuron_batch_size=2,
            default_width=None,
            default_height=None,
        ) as live:
            yield live, stand_in
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def png_size(response: httpx.Response) -> tuple[int, int]:
    assert response.status_code == 200, response.text
    return Image.open(io.BytesIO(response.content)).size


def test_every_size_is_loaded_with_the_familys_pipeline_class(three_sizes):
    _, stand_in = three_sizes
    assert {key: class_name for key, (class_name, _) in stand_in.loaded.items()} == {
        key: "NeuronStableDiffusionXLPipeline" for key in (SQUARE, PORTRAIT, LANDSCAPE)
    }


def test_each_request_runs_on_the_pipeline_compiled_for_its_size(three_sizes):
    live, stand_in = three_sizes
    pipelines = {key: pipeline for key, (_, pipeline) in stand_in.loaded.items()}
    before = {key: len(p.calls) for key, p in pipelines.items()}
    default = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a fox"}, timeout=60)
    assert png_size(default) == (64, 64)  # the first of NEURON_SHAPES is the default size
    portrait = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a tall fox", "width": 64, "height": 96})
    assert png_size(portrait) == (64, 96)
    landscape = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a wide fox", "width": 96, "height": 64})
    assert png_size(landscape) == (96, 64)
    calls = {key: p.calls[before[key] :] for key, p in pipelines.items()}
    assert [c["prompt"] for c in calls[SQUARE]] == [["a fox", "a fox"]]  # padded to the compiled batch of 2
    assert [c["prompt"] for c in calls[PORTRAIT]] == [["a tall fox", "a tall fox"]]
    assert [c["prompt"] for c in calls[LANDSCAPE]] == [["a wide fox", "a wide fox"]]


def test_concurrent_requests_of_several_sizes_each_get_their_size(three_sizes):
    live, _ = three_sizes
    asks = [(64, 64), (64, 96), (96, 64)] * 3

    def ask(size: tuple[int, int]) -> tuple[int, int]:
        width, height = size
        body = {"prompt": f"fox {width}x{height}", "width": width, "height": height}
        return png_size(httpx.post(f"{live.url}/v1/generate", json=body, timeout=60))

    with ThreadPoolExecutor(len(asks)) as pool:
        assert list(pool.map(ask, asks)) == asks


def test_a_size_not_compiled_is_a_422_listing_the_sizes_served(three_sizes):
    live, _ = three_sizes
    response = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a fox", "width": 128, "height": 128})
    assert response.status_code == 422
    error = response.json()["error"]
    assert "only 64x64, 64x96 and 96x64 images" in error and "got 128x128" in error


def test_info_lists_every_compiled_shape(three_sizes):
    live, _ = three_sizes
    info = httpx.get(f"{live.url}/v1/info").json()
    assert info["backend"] == "neuron" and info["native_size"] == {"width": 64, "height": 64}
    assert info["compiled_shapes"] == [
        {"batch_size": 2, "height": 64, "width": 64},
        {"batch_size": 2, "height": 96, "width": 64},
        {"batch_size": 2, "height": 64, "width": 96},
    ]
    # The size presets the UI offers are the compiled sizes, not the family's whole list.
    assert info["family"]["name"] == "sdxl"
    assert info["family"]["sizes"] == [
        {"width": 64, "height": 64},
        {"width": 64, "height": 96},
        {"width": 96, "height": 64},
    ]


def test_unset_neuron_shapes_serves_every_complete_size_with_the_familys_default_first(tmp_path, optimum_neuron):
    root = write_compiled(tmp_path / "compiled", ["1024x512", "512x512"], "StableDiffusionPipeline")
    (root / "768x768").mkdir()  # an unfinished size (no saved pipeline yet) is not served
    backend = load_neuron_backend(load_settings(backend="neuron", model_id=str(root), model_cache_dir=tmp_path))
    assert backend.sizes == ((512, 512), (1024, 512)) and backend.native_size == (512, 512)
    assert {class_name for class_name, _ in optimum_neuron.loaded.values()} == {"NeuronStableDiffusionPipeline"}


def test_a_size_asked_for_but_not_compiled_stops_the_load_naming_both(tmp_path, optimum_neuron):
    root = write_compiled(tmp_path / "compiled", [SQUARE, PORTRAIT], "FluxPipeline")
    settings = load_settings(
        backend="neuron", model_id=str(root), model_cache_dir=tmp_path, neuron_shapes=f"{SQUARE},{LANDSCAPE}"
    )
    with pytest.raises(RuntimeError, match=r"NEURON_SHAPES asks for 96x64, .*\(compiled there: 64x64, 64x96\)"):
        load_neuron_backend(settings)
    assert optimum_neuron.loaded == {}  # nothing is loaded onto the device before every size is there


def test_a_compiled_guidance_embedded_flux_is_refused_before_loading(tmp_path, optimum_neuron):
    root = write_compiled(tmp_path / "compiled", [SQUARE], "FluxPipeline")
    (root / SQUARE / "transformer").mkdir()
    (root / SQUARE / "transformer" / "config.json").write_text(json.dumps({"guidance_embeds": True}))
    with pytest.raises(RuntimeError, match="embeds guidance"):
        load_neuron_backend(load_settings(backend="neuron", model_id=str(root), model_cache_dir=tmp_path))
    assert optimum_neuron.loaded == {}


def test_a_tensor_parallel_size_other_than_compiled_stops_the_load(tmp_path, optimum_neuron):
    root = write_compiled(tmp_path / "compiled", [SQUARE], "StableDiffusionXLPipeline", tensor_parallel_size=2)
    settings = load_settings(backend="neuron", model_id=str(root), model_cache_dir=tmp_path)
    assert load_neuron_backend(settings.model_copy(update={"neuron_tensor_parallel_size": 2})).sizes == ((64, 64),)
    with pytest.raises(RuntimeError, match=r"NEURON_TENSOR_PARALLEL_SIZE=8, but .* tensor parallel 2"):
        load_neuron_backend(settings.model_copy(update={"neuron_tensor_parallel_size": 8}))


def test_a_folder_whose_unet_says_another_size_stops_the_load(tmp_path, optimum_neuron):
    root = write_compiled(tmp_path / "compiled", [SQUARE])
    (root / SQUARE).rename(root / LANDSCAPE)
    with pytest.raises(RuntimeError, match="compiled for 64x64, not 96x64"):
        load_neuron_backend(load_settings(backend="neuron", model_id=str(root), model_cache_dir=tmp_path))


def test_downloaded_sizes_count_only_with_their_completion_marker(tmp_path):
    root = write_compiled(tmp_path, [SQUARE, PORTRAIT])
    (root / PORTRAIT / COMPLETE_MARKER).unlink()  # still uploading when the prefix was downloaded
    assert [size.key for size, _ in find_compiled(root, None, need_marker=True)] == [SQUARE]
    assert [size.key for size, _ in find_compiled(root, None, need_marker=False)] == [SQUARE, PORTRAIT]
    with pytest.raises(RuntimeError, match="asks for 64x96"):
        find_compiled(root, [ImageSize(64, 64), ImageSize(64, 96)], need_marker=True)
    with pytest.raises(RuntimeError, match="no compiled size folder"):
        find_compiled(tmp_path / "empty", None, need_marker=False)
