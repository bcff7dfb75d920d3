"""The CUDA speed steps on the CPU: which apply, what each changes, and that images stay the same."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import StableDiffusionPipeline
from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0, FusedAttnProcessor2_0

from app.backends import cuda_tuning
from app.backends.cuda_tuning import (
    ServedShape,
    apply_speed_settings,
    compile_options,
    load_dtype,
    plan_speed_settings,
    served_shapes,
    warm_up,
)
from app.models.random_pipeline import materialize
from app.settings import load_settings
from tests.app.lora_adapters import make_adapter
from tests.support.small_sd21 import SMALL_SD21


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return materialize(SMALL_SD21, tmp_path_factory.mktemp("models"))


@pytest.fixture
def pipe(model_dir: Path) -> StableDiffusionPipeline:
    pipeline = StableDiffusionPipeline.from_pretrained(model_dir)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


def _image(pipeline: StableDiffusionPipeline, batch: int = 1) -> np.ndarray:
    return pipeline(
        ["a red square"] * batch,
        height=64,
        width=64,
        num_inference_steps=3,
        generator=torch.Generator().manual_seed(7),
        output_type="np",
    ).images


def _skipped(settings_overrides: dict, device_type: str) -> dict[str, str | None]:
    return {s.name: s.skipped for s in plan_speed_settings(load_settings(**settings_overrides), device_type)}


def test_on_cuda_every_default_step_applies_and_compiling_waits_to_be_asked_for():
    # A pod compiles at start-up inside its startupProbe budget; on an H100 that took minutes (docs/benchmarks.md).
    skipped = _skipped({}, "cuda")
    assert skipped.pop("compile") == "CUDA_COMPILE off"
    assert skipped.pop("step_cache") == "CUDA_STEP_CACHE off"  # it changes the image a little: asked for, too
    assert skipped == dict.fromkeys(("dtype", "attention", "fuse_qkv", "channels_last"))
    assert _skipped({"cuda_compile": "max-autotune-no-cudagraphs"}, "cuda")["compile"] is None


def test_on_cpu_half_precision_and_cuda_graphs_are_skipped_with_a_reason():
    skipped = _skipped({"cuda_compile": "reduce-overhead"}, "cpu")
    assert "half precision" in skipped["dtype"]
    assert "CUDA graphs" in skipped["compile"]
    assert "CUDA graphs" in _skipped({"cuda_compile": "default", "cuda_graphs": True}, "cpu")["compile"]
    # A compile mode without graphs still applies on the CPU.
    assert _skipped({"cuda_compile": "max-autotune-no-cudagraphs"}, "cpu")["compile"] is None


def test_fused_qkv_needs_sdpa():
    assert "CUDA_SDPA" in _skipped({"cuda_sdpa": False}, "cuda")["fuse_qkv"]


def test_with_lora_dir_the_projections_stay_unfused_so_an_adapter_acts_in_full(model_dir, tmp_path):
    # A fused to_qkv bypasses the adapter's layers on to_q/to_k/to_v (measured on this model: the image moves
    # less than half as far from the plain one), so LORA_DIR turns fuse_qkv off.
    make_adapter(model_dir, tmp_path, "ink", seed=1)
    images = []
    # The other speed steps (SDPA, channels-last) round differently: both pipelines take them.
    for settings in (load_settings(cuda_fuse_qkv=False), load_settings(lora_dir=str(tmp_path))):
        pipeline = StableDiffusionPipeline.from_pretrained(model_dir)
        pipeline.set_progress_bar_config(disable=True)
        apply_speed_settings(pipeline, settings)
        pipeline.load_lora_weights(str(tmp_path), weight_name="ink.safetensors", adapter_name="ink")
        images.append(_image(pipeline))
    assert "LORA_DIR" in _skipped({"lora_dir": str(tmp_path)}, "cuda")["fuse_qkv"]
    np.testing.assert_array_equal(images[0], images[1])


def test_compile_options_add_graphs_and_tuning_to_the_mode():
    options = compile_options(load_settings(cuda_compile="max-autotune-no-cudagraphs", cuda_graphs=True), on_cuda=True)
    assert options["max_autotune"] is True
    assert options["triton.cudagraphs"] is True
    assert options["conv_1x1_as_mm"] is True
    assert compile_options(load_settings(cuda_compile="default", cuda_inductor_tuning=True), on_cuda=False) == {}


def test_apply_on_cpu_fuses_and_relayouts_without_changing_the_image(pipe, caplog):
    reference = _image(pipe)
    with caplog.at_level(logging.INFO, logger=cuda_tuning.__name__):
        apply_speed_settings(pipe, load_settings(cuda_compile="off"))
    assert "speed step dtype (bf16) skipped" in caplog.text
    assert pipe.unet.dtype == torch.float32
    for model in (pipe.unet, pipe.vae):
        assert {type(p) for p in model.attn_processors.values()} == {FusedAttnProcessor2_0}
    assert pipe.unet.conv_in.weight.is_contiguous(memory_format=torch.channels_last)
    assert not pipe.unet.conv_in.weight.is_contiguous()
    np.testing.assert_allclose(_image(pipe), reference, atol=1e-4)


def test_sdpa_off_gives_plain_attention_and_the_same_image(pipe):
    reference = _image(pipe)
    apply_speed_settings(pipe, load_settings(cuda_sdpa=False, cuda_compile="off"))
    assert {type(p) for p in pipe.unet.attn_processors.values()} == {AttnProcessor}
    np.testing.assert_allclose(_image(pipe), reference, atol=1e-4)


def test_compile_wraps_unet_and_vae_decode_with_static_shapes(pipe, monkeypatch):
    calls = []

    def fake_compile(target, **kwargs):
        # Compiling for real takes minutes on two cores; the wiring is what is under test here.
        calls.append((target, kwargs))
        return target

    monkeypatch.setattr(torch, "compile", fake_compile)
    unet, decode = pipe.unet, pipe.vae.decode
    apply_speed_settings(pipe, load_settings(cuda_compile="default"))
    assert [c[0] for c in calls] == [unet, decode]
    assert all(c[1]["dynamic"] is False and c[1]["fullgraph"] is True for c in calls)
    assert isinstance(next(iter(pipe.unet.attn_processors.values())), FusedAttnProcessor2_0)


def test_attention_step_replaces_any_earlier_processor(pipe):
    pipe.unet.set_attn_processor(AttnProcessor())
    apply_speed_settings(pipe, load_settings(cuda_fuse_qkv=False, cuda_compile="off"))
    assert {type(p) for p in pipe.unet.attn_processors.values()} == {AttnProcessor2_0}


def test_served_shapes_cover_every_batch_size():
    shapes = served_shapes(load_settings(max_batch_size=3), 512, 512)
    assert shapes == [ServedShape(1, 512, 512), ServedShape(2, 512, 512), ServedShape(3, 512, 512)]


def test_warm_up_runs_each_shape_with_guidance(pipe):
    seen = []
    pipe.unet.register_forward_pre_hook(lambda _, args: seen.append(tuple(args[0].shape)))
    timings = warm_up(pipe, [ServedShape(1, 64, 64), ServedShape(2, 64, 48)], steps=2)
    # Guidance doubles the UNet batch; latents are an eighth of the image size.
    assert seen == [(2, 4, 8, 8)] * 2 + [(4, 4, 8, 6)] * 2
    assert [shape.batch for shape, _ in timings] == [1, 2]
    assert torch._dynamo.config.recompile_limit >= 4


def test_weights_load_in_the_cuda_dtype_only_on_a_gpu():
    assert load_dtype(load_settings(cuda_dtype="fp16"), "cuda") == torch.float16
    assert load_dtype(load_settings(cuda_dtype="bf16"), "cpu") == torch.float32


def test_compiled_pipeline_traces_whole_graphs_and_warm_up_covers_served_shapes(pipe, monkeypatch):
    from torch._dynamo.utils import counters

    real_compile = torch.compile

    def compile_without_codegen(target, *, options, **kwargs):
        # Dynamo's tracing (where graph breaks and recompiles come from) with eager kernels instead
        # of inductor's, which take minutes to build on two cores.
        return real_compile(target, backend="eager", **kwargs)

    monkeypatch.setattr(torch, "compile", compile_without_codegen)
    torch._dynamo.reset()
    reference = _image(pipe)
    before = counters["stats"]["unique_graphs"]
    apply_speed_settings(pipe, load_settings(cuda_compile="default"))
    warm_up(pipe, [ServedShape(1, 64, 64), ServedShape(2, 64, 64)], steps=2)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs - before == 4  # UNet and VAE decode, at two batch sizes: fullgraph, no breaks
    with torch._dynamo.config.patch(error_on_recompile=True):
        image = _image(pipe)
    assert counters["stats"]["unique_graphs"] == graphs
    np.testing.assert_allclose(image, reference, atol=1e-4)
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("model", "skipped"),
    [
        ("builtin:tiny-qwen-image", "set_attn_processor skipped for AutoencoderKLQwenImage"),
        ("builtin:tiny-z-image", "fuse_qkv_projections skipped for ZImageTransformer2DModel"),
    ],
)
def test_default_steps_skip_what_a_2026_family_lacks_and_it_still_draws(model, skipped, tmp_path, caplog):
    # Qwen-Image's video VAE has no attention processors and 3-D convolutions; Z-Image's transformer no fused QKV.
    from app.backends.diffusers_backend import load_diffusers_pipeline
    from app.models.builtin import builtin_spec

    pipeline, _ = load_diffusers_pipeline(materialize(builtin_spec(model), tmp_path))
    with caplog.at_level(logging.INFO, logger=cuda_tuning.__name__):
        apply_speed_settings(pipeline, load_settings())
    assert skipped in caplog.text
    pipeline("a red square", height=64, width=64, num_inference_steps=1, output_type="np")
