"""The pipeline benchmark: variants, stage timing, FLOP counting, results file, and a full run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from diffusers import StableDiffusionPipeline

from app.bench import pipeline as bench_pipeline
from app.bench.flops import pipeline_image_flops
from app.bench.stages import stage_timer
from app.models.builtin import TINY
from app.models.random_pipeline import materialize
from app.settings import load_settings
from common.bench.results_file import read_section, update_section


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture
def tiny(cache_dir: Path) -> StableDiffusionPipeline:
    pipe = StableDiffusionPipeline.from_pretrained(materialize(TINY, cache_dir))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_results_file_sections_are_replaced_not_duplicated(tmp_path):
    path = tmp_path / "results.md"
    path.write_text("# Results\n\nHand-written provenance.\n")
    update_section(path, "a", "first")
    update_section(path, "b", "other")
    update_section(path, "a", "second")
    text = path.read_text()
    assert text.startswith("# Results\n\nHand-written provenance.\n")
    assert text.count("<!-- bench:a -->") == 1
    assert read_section(path, "a") == "second"
    assert read_section(path, "b") == "other"
    assert text.index("bench:a") < text.index("bench:b")
    with pytest.raises(ValueError):
        update_section(path, "bad -->", "x")


def test_variants_compare_baseline_with_the_settings():
    settings = load_settings()
    plain = bench_pipeline.variants(settings, ladder=False, device_type="cuda")
    assert [v.name for v in plain] == ["baseline", "optimized"]
    assert plain[0].settings.cuda_dtype == "fp16"
    assert plain[0].settings.cuda_compile == "off"
    assert plain[1].settings == settings


def test_ladder_adds_one_step_at_a_time_and_leaves_out_no_ops():
    settings = load_settings(cuda_compile="default", cuda_graphs=True)
    on_gpu = [v.name for v in bench_pipeline.variants(settings, ladder=True, device_type="cuda")]
    assert on_gpu == ["baseline", "+dtype", "+fuse_qkv", "+channels_last", "+compile", "+cuda_graphs"]
    # On a CPU, bf16 is skipped, and compile with graphs is skipped, so graphs add nothing.
    on_cpu = [v.name for v in bench_pipeline.variants(settings, ladder=True, device_type="cpu")]
    assert on_cpu == ["baseline", "+fuse_qkv", "+channels_last", "+compile"]


def test_stage_timer_counts_each_stage_and_restores_the_pipeline(tiny):
    with stage_timer(tiny) as times:
        tiny("a cat", height=64, width=64, num_inference_steps=3, generator=torch.Generator().manual_seed(0))
    assert times.calls == {"text_encoder": 2, "unet": 3, "vae_decode": 1}  # prompt + negative prompt
    assert all(seconds > 0 for seconds in times.seconds.values())
    assert not tiny.unet._forward_hooks and not tiny.text_encoder._forward_pre_hooks
    assert "decode" not in vars(tiny.vae)


def test_guidance_doubles_the_unet_flops(tiny):
    guided = pipeline_image_flops(tiny, height=64, width=64, steps=4)
    unguided = pipeline_image_flops(tiny, height=64, width=64, steps=4, guidance=False)
    assert guided.unet_step == pytest.approx(2 * unguided.unet_step)
    assert guided.vae_decode == unguided.vae_decode > 0


def test_resolve_model_refuses_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="neither"):
        bench_pipeline.resolve_model(str(tmp_path / "missing"), tmp_path)


def test_a_full_run_prints_and_records_both_variants(cache_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_INDUCTOR_TUNING", "false")  # a changed speed setting is part of the command
    parser = argparse.ArgumentParser()
    bench_pipeline.add_arguments(parser)
    results = tmp_path / "benchmarks.md"
    argv = ["--model", "builtin:tiny", "--cache-dir", str(cache_dir), "--device", "cpu"]
    argv += ["--batch-sizes", "1,2", "--height", "64", "--width", "64", "--steps", "2"]
    argv += ["--warmup", "1", "--iterations", "2", "--stage-passes", "1", "--results-file", str(results)]
    args = parser.parse_args(argv)
    assert bench_pipeline.run(args) == 0
    assert bench_pipeline.run(args) == 0  # a rerun updates the same section
    out = capsys.readouterr().out
    assert "CUDA_INDUCTOR_TUNING=False python -m app.bench pipeline --model builtin:tiny" in out
    text = results.read_text()
    assert text.count("<!-- bench:pipeline ") == 1
    cells = [[c.strip() for c in line.split("|")] for line in text.splitlines() if line.startswith("|")]
    rows = [row for row in cells if row[1] in ("baseline", "optimized")]
    assert len(rows) == 4  # two variants at two batch sizes
    assert [row[5] for row in rows if row[1] == "baseline"] == ["1", "1"]  # the ratio to itself


def test_the_ladder_ends_with_the_step_cache_where_the_denoiser_has_one():
    settings = load_settings(cuda_step_cache=True)
    flux = [v.name for v in bench_pipeline.variants(settings, True, "cpu", "FluxTransformer2DModel")]
    assert flux == ["baseline", "+fuse_qkv", "+channels_last", "+step_cache"]
    # A UNet has no step cache in diffusers: the rung would measure nothing new.
    sd = [v.name for v in bench_pipeline.variants(settings, True, "cpu", "UNet2DConditionModel")]
    assert sd == ["baseline", "+fuse_qkv", "+channels_last"]
