"""Backend choice per machine, the Neuron compiled-shape logic and padding, and the CUDA path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.backends import selection
from app.backends.base import GenerationParams, UnsupportedRequest
from app.backends.neuron import (
    CompiledPipeline,
    CompiledShape,
    NeuronBackend,
    check_size,
    load_neuron_backend,
    pad_batch,
    read_compiled_shape,
)
from app.backends.selection import Probes, choose_backend
from app.models.families import SD
from app.settings import load_settings
from tests.app.fakes import RecordingNeuronPipeline


def probes(neuron: bool = False, optimum: bool = False, cuda: bool = False) -> Probes:
    return Probes(neuron_device=lambda: neuron, optimum_neuron=lambda: optimum, cuda=lambda: cuda)


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        (probes(neuron=True, optimum=True, cuda=True), "neuron"),
        (probes(neuron=True, optimum=True), "neuron"),
        (probes(neuron=True, optimum=False, cuda=True), "cuda"),  # device but no optimum-neuron
        (probes(neuron=False, optimum=True, cuda=True), "cuda"),  # optimum-neuron but no device
        (probes(cuda=True), "cuda"),
        (probes(), "cpu"),
    ],
    ids=["inf2+gpu", "inf2", "neuron-device-without-optimum", "optimum-without-device", "gpu", "cpu"],
)
def test_auto_picks_neuron_then_cuda_then_cpu(machine, expected):
    assert choose_backend("auto", machine) == expected


@pytest.mark.parametrize("forced", ["neuron", "cuda", "cpu"])
def test_a_forced_backend_is_taken_as_is(forced):
    def must_not_probe() -> bool:
        raise AssertionError("a forced backend must not probe the machine")

    assert choose_backend(forced, Probes(must_not_probe, must_not_probe, must_not_probe)) == forced


def test_detection_functions_answer_on_this_machine():
    assert isinstance(selection.neuron_device_present(), bool)
    assert selection.optimum_neuron_importable() is False  # never installed outside the Neuron image
    assert isinstance(selection.cuda_available(), bool)


@pytest.mark.parametrize("name", ["neuron", "cuda", "cpu"])
def test_load_backend_dispatches_to_the_chosen_module(monkeypatch, name):
    import app.backends.cpu
    import app.backends.cuda
    import app.backends.neuron

    calls = []
    for module, loader in (
        (app.backends.cpu, "load_cpu_backend"),
        (app.backends.cuda, "load_cuda_backend"),
        (app.backends.neuron, "load_neuron_backend"),
    ):
        monkeypatch.setattr(module, loader, lambda s, loader=loader: calls.append(loader) or loader)
    assert selection.load_backend(load_settings(backend=name)) == f"load_{name}_backend"
    assert calls == [f"load_{name}_backend"]


def test_forced_cuda_without_a_gpu_fails_with_a_clear_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from app.backends.cuda import load_cuda_backend

    with pytest.raises(RuntimeError, match="no CUDA device"):
        load_cuda_backend(load_settings(backend="cuda", model_cache_dir=tmp_path))


# --- Neuron: compiled shape, shape check, padding (pure logic; optimum-neuron is not installed here)


def write_neuron_artifacts(root: Path, batch: int, latent_h: int, latent_w: int) -> Path:
    """Config files laid out as optimum-neuron's save_pretrained writes them (no compiled graphs)."""
    for folder, neuron in (
        ("unet", {"static_batch_size": batch * 2, "static_height": latent_h, "static_width": latent_w}),
        ("text_encoder", {"static_batch_size": batch, "static_sequence_length": 77}),
        ("vae_decoder", {"static_batch_size": batch, "static_height": latent_h, "static_width": latent_w}),
    ):
        (root / folder).mkdir(parents=True)
        config: dict[str, Any] = {"neuron": {"compiler_type": "neuronx-cc", **neuron}}
        if folder == "vae_decoder":
            config["block_out_channels"] = [128, 256, 512, 512]
        (root / folder / "config.json").write_text(json.dumps(config))
    return root


FALLBACK = CompiledShape(batch_size=1, height=512, width=512)


def test_compiled_shape_is_read_from_the_artifacts(tmp_path):
    model = write_neuron_artifacts(tmp_path, batch=4, latent_h=96, latent_w=64)
    assert read_compiled_shape(model, FALLBACK) == CompiledShape(batch_size=4, height=768, width=512)


def test_compiled_shape_falls_back_to_the_settings_without_neuron_configs(tmp_path):
    (tmp_path / "unet").mkdir()
    (tmp_path / "unet" / "config.json").write_text(json.dumps({"sample_size": 64}))
    assert read_compiled_shape(tmp_path, FALLBACK) == FALLBACK


def test_a_request_of_another_shape_gets_a_message_naming_the_supported_ones():
    check_size([(768, 512)], width=768, height=512)
    with pytest.raises(UnsupportedRequest, match=r"only 768x512 images \(.* that size\); got 512x512"):
        check_size([(768, 512)], width=512, height=512)
    served = [(1024, 1024), (896, 1152), (1152, 896)]
    check_size(served, width=1152, height=896)
    with pytest.raises(UnsupportedRequest, match=r"only 1024x1024, 896x1152 and 1152x896 images .* got 1152x1152"):
        check_size(served, width=1152, height=1152)


def test_pad_batch_repeats_the_last_item_up_to_the_compiled_size():
    assert pad_batch(["a", "b"], 4) == ["a", "b", "b", "b"]
    assert pad_batch(["a"], 1) == ["a"]
    with pytest.raises(ValueError, match="exceeds"):
        pad_batch(["a", "b", "c"], 2)
    with pytest.raises(ValueError, match="empty"):
        pad_batch([], 2)


def request(prompt: str, width: int = 512, height: int = 512) -> GenerationParams:
    return GenerationParams(prompt, "", 2, 7.5, width, height, 1)


def test_neuron_backend_pads_to_the_compiled_batch_and_returns_only_real_images():
    pipeline = RecordingNeuronPipeline()
    backend = NeuronBackend([CompiledPipeline(pipeline, CompiledShape(batch_size=4, height=512, width=512))], SD)
    images = backend.generate([request("a"), request("b")])
    assert pipeline.calls[0]["prompt"] == ["a", "b", "b", "b"]
    assert len(pipeline.calls[0]["generator"]) == 4
    assert [im.getpixel((0, 0)) for im in images] == [(0, 0, 0), (1, 0, 0)]
    assert backend.max_batch_size == 4
    assert backend.native_size == (512, 512)


def test_neuron_backend_check_rejects_other_shapes():
    backend = NeuronBackend([CompiledPipeline(RecordingNeuronPipeline(), CompiledShape(1, 512, 512))], SD)
    backend.check(request("ok"))
    with pytest.raises(UnsupportedRequest, match="512x512"):
        backend.check(request("no", width=256))


def test_neuron_refuses_the_builtin_model_before_importing_optimum(tmp_path):
    with pytest.raises(RuntimeError, match="not Neuron-compiled"):
        load_neuron_backend(load_settings(backend="neuron", model_cache_dir=tmp_path))


def test_neuron_loader_needs_optimum_neuron(tmp_path):
    model = write_neuron_artifacts(tmp_path / "model" / "512x512", batch=1, latent_h=64, latent_w=64)
    (model / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    with pytest.raises(ModuleNotFoundError, match="optimum"):
        load_neuron_backend(load_settings(backend="neuron", model_id=str(model.parent), model_cache_dir=tmp_path))


# --- CUDA: runs where a GPU is present


@pytest.mark.gpu
def test_cuda_backend_generates_with_the_builtin_model(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    from app.backends.cuda import load_cuda_backend
    from app.backends.cuda_tuning import served_shapes

    settings = load_settings(
        backend="cuda", model_cache_dir=tmp_path, max_batch_size=2, cuda_dtype="fp16", cuda_compile="off"
    )
    backend = load_cuda_backend(settings)
    assert backend.device.startswith("cuda")
    assert backend.describe()["dtype"] == "float16" and backend.describe()["gpu"]
    assert [shape.batch for shape in served_shapes(settings, 64, 64)] == [1, 2]
    backend.warm_up(steps=2, size=(64, 64))
    params = GenerationParams("a fox", "", 2, 7.5, 64, 64, 7)
    first, second = backend.generate([params, params])
    assert first.size == (64, 64)
    assert first.tobytes() == second.tobytes()  # same seed, same image, even inside one batch


def test_neuron_warm_up_runs_each_compiled_shape_once():
    square, wide = RecordingNeuronPipeline(), RecordingNeuronPipeline()
    backend = NeuronBackend(
        [CompiledPipeline(square, CompiledShape(2, 512, 512)), CompiledPipeline(wide, CompiledShape(2, 512, 768))], SD
    )
    backend.warm_up(steps=2, size=(512, 512))
    assert len(square.calls) == 1 and len(square.calls[0]["prompt"]) == 2
    assert len(wide.calls) == 1 and len(wide.calls[0]["prompt"]) == 2


class RecordingModule:
    def __init__(self):
        self.processors: list[object] = []

    def set_attn_processor(self, processor: object) -> None:
        self.processors.append(processor)


class RecordingPipeline:
    """Records how prepare_pipeline_for_cuda treats a pipeline (no GPU involved)."""

    def __init__(self):
        self.unet, self.vae = RecordingModule(), RecordingModule()
        self.moves: list[tuple[object, ...]] = []

    def to(self, *args: object) -> RecordingPipeline:
        self.moves.append(args)
        return self


@pytest.mark.parametrize(("setting", "dtype_name"), [("bf16", "bfloat16"), ("fp16", "float16"), ("fp32", "float32")])
def test_prepare_pipeline_for_cuda_moves_to_the_gpu_dtype_then_applies_the_speed_steps(
    setting, dtype_name, monkeypatch
):
    import torch

    from app.backends import cuda

    applied = []
    monkeypatch.setattr(cuda, "apply_speed_settings", lambda pipe, settings: applied.append((pipe, settings)) or pipe)
    pipeline = RecordingPipeline()
    settings = load_settings(cuda_dtype=setting)
    prepared = cuda.prepare_pipeline_for_cuda(pipeline, settings)
    assert prepared is pipeline
    assert pipeline.moves == [("cuda", getattr(torch, dtype_name))]
    assert applied == [(pipeline, settings)]  # each step itself: tests/app/test_cuda_tuning.py
