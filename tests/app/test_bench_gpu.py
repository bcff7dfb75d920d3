"""`make bench-gpu` without a GPU: the published configs it carries, and its dry run through the device's command.

The dry run goes through tools/bench_gpu.sh, the command the device tool runs, with the prices that
`make bench-gpu-wheels` writes from the CDK app's presets, into a copy of the results file, as on the GPU machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
import torch

from app.bench import gpu
from app.bench.gpu_costs import DENSE_BF16_TFLOPS
from app.bench.gpu_models import MODELS, build_module, component_names
from app.settings import load_settings
from common.bench.results_file import read_section, sections
from tools.bench_gpu_carry import write_prices

REPO_ROOT = Path(__file__).resolve().parents[2]

# Parameter counts published for each model, and how close the configs must come (None: exactly).
PUBLISHED = {
    # docs/benchmarks.md "Where the benchmark model's configs come from": 865,910,724, 83,653,863, 340,387,840.
    ("sd21-base", "unet"): (865_910_724, None),
    ("sd21-base", "vae"): (83_653_863, None),
    ("sd21-base", "text_encoder"): (340_387_840, None),
    # SDXL's UNet "2.6 B" and FLUX.1-schnell's "12 B" transformer (cdk/image/presets.py, the model cards); T5-XXL's
    # encoder 4.7 B (cdk/image/presets.py).
    ("sdxl-base", "unet"): (2.6e9, 0.02),
    ("flux-schnell", "transformer"): (11.9e9, 0.01),
    ("flux-schnell", "text_encoder_2"): (4.7e9, 0.02),
    # FLUX.2 [klein] 4B: the "4B" of its name and model card for the transformer (3,875,544,576 here); Qwen3-4B's
    # card "Number of Parameters: 4.0B" (embeddings tied); the FLUX.2 VAE's 84,046,115 as counted in the klein-9B
    # folder's safetensors (a tt-metal reference loader's docstring: 251 tensors), the family's one VAE.
    ("flux2-klein-4b", "transformer"): (4.0e9, 0.04),
    ("flux2-klein-4b", "text_encoder"): (4.0e9, 0.01),
    ("flux2-klein-4b", "vae"): (84_046_115, None),
}


@pytest.mark.parametrize(("model", "component"), sorted(PUBLISHED))
def test_the_carried_configs_build_the_published_sizes(model, component):
    with torch.device("meta"):  # shapes only: 12 B parameters allocate nothing
        module = build_module(MODELS[model], component)
    count = sum(p.numel() for p in module.parameters())
    expected, tolerance = PUBLISHED[(model, component)]
    if tolerance is None:
        assert count == expected
    else:
        assert abs(count - expected) <= tolerance * expected, f"{model} {component}: {count:,} parameters"


def test_every_model_is_a_preset_and_builds_on_the_meta_device():
    from cdk.image.presets import PRESETS

    assert set(MODELS) <= set(PRESETS), "each benchmark model is priced as the preset of its name"
    for model in MODELS.values():
        with torch.device("meta"):
            for component in component_names(model):
                build_module(model, component, dry=True)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(body: str, first_header: str, second_header: str) -> list[dict[str, str]]:
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if _cells(line)[:2] == [first_header, second_header])
    headers = _cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(headers, _cells(line), strict=True)))
    return rows


@pytest.mark.process
def test_the_dry_run_through_the_device_command_writes_its_section(tmp_path):
    write_prices(tmp_path / "carry" / "prices.json")
    (tmp_path / "no-wheels").mkdir()
    out = tmp_path / "out"
    env = {
        **os.environ,
        "GPU_PYTHON": sys.executable,
        "BENCH_GPU_WHEELS": str(tmp_path / "no-wheels"),
        # A budget already spent: the headline rows always run, every ladder rung is skipped, compiled or not.
        "BENCH_ARGS": "--dry-run --iterations 2 --budget-s 1 --scale-from H200 "
        f"--prices {tmp_path / 'carry' / 'prices.json'}",
    }
    result = subprocess.run(
        ["bash", "tools/bench_gpu.sh", str(out)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    results = out / "benchmarks.md"
    original = (REPO_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert results.read_text(encoding="utf-8").startswith(original.rstrip("\n")), "a copy of the page, added to"
    keys = [k for k in sections(results) if k.startswith("gpu ") and k.endswith(" dry-run")]
    assert len(keys) == 1, keys
    body = read_section(results, keys[0])
    assert body is not None
    assert "Dry run of the GPU benchmark on CPU" in body and "not a measurement" in body
    assert f"torch {torch.__version__}" in body and "diffusers " in body and "driver " in body
    assert "cdk/image/presets.py" in body  # where the prices came from

    headline = _table(body, "model", "size")
    assert [(r["model"], r["batch"]) for r in headline] == [
        ("SD 2.1-base", "1"),
        ("SD 2.1-base", "8"),
        ("SDXL base 1.0", "1"),
        ("FLUX.1-schnell", "1"),
        ("FLUX.2 [klein] 4B", "1"),
    ]
    pinned = {
        "SD 2.1-base": ("g6.xlarge", "L4"),
        "SDXL base 1.0": ("g6.xlarge", "L4"),
        "FLUX.1-schnell": ("g6e.xlarge", "L40S"),
        "FLUX.2 [klein] 4B": ("g6.2xlarge", "L4"),  # cdk/image/presets.py: host memory for loading, an L4's GPU
    }
    for row in headline:
        instance, target_gpu = pinned[row["model"]]
        assert row["pinned instance"] == instance
        seconds = float(row["s/image"])
        assert seconds > 0 and math.isclose(float(row["images/s"]), 1 / seconds, rel_tol=0.01)
        there = row["s/image there"]
        assert there.endswith("(estimate)") and row["$/1,000 images there"].endswith("(estimate)")
        scaled = float(there.split()[0])
        ratio = DENSE_BF16_TFLOPS["H200"] / DENSE_BF16_TFLOPS[target_gpu]
        assert math.isclose(scaled, seconds * ratio, rel_tol=0.01)
        cost = float(row["$/1,000 images there"].split()[0])
        assert math.isclose(cost, 1000 * scaled * float(row["$/hour"]) / 3600, rel_tol=0.01)

    ladder = _table(body, "model", "rung")
    rungs = [r for r in ladder if r["rung"] != "eager (SDPA)"]
    assert rungs and all(re.match(r"skipped: needs about \d+ s", r["status"]) for r in rungs), rungs
    assert any(r["rung"].startswith("+compile") for r in rungs)

    rows = json.loads((out / "bench-gpu.json").read_text(encoding="utf-8"))
    assert sum(1 for r in rows if r["status"] == "measured") == 5
    assert "SD 2.1-base" in (out / "bench-gpu.log").read_text(encoding="utf-8")


def test_nan_images_from_random_weights_are_timed_without_an_image_conversion(monkeypatch):
    built = gpu.build_pipeline

    def poisoned(*args, **kwargs):
        pipe = built(*args, **kwargs)
        torch.nn.init.constant_(pipe.unet.conv_out.weight, math.nan)  # every latent NaN from the first step on
        return pipe

    monkeypatch.setattr(gpu, "build_pipeline", poisoned)
    rows = [gpu.Row("sd21-base", gpu.EAGER_RUNG.name, 1, True)]
    group = gpu.Group("sd21-base", gpu.EAGER_RUNG, (1,), True)
    args = argparse.Namespace(dry_run=True, warmup=1, iterations=1)
    with warnings.catch_warnings():
        # A PIL conversion of NaN pixels warns "invalid value encountered in cast" (numpy), then saves black.
        warnings.simplefilter("error", RuntimeWarning)
        gpu.measure_group(group, rows, gpu.DRY_SHAPES["sd21-base"], load_settings(), args, torch.device("cpu"))
    assert rows[0].status == "measured" and len(rows[0].seconds) == 1


def test_the_ladder_measures_the_step_cache_eager_and_only_where_the_family_has_one():
    groups = gpu.plan(ladder=True, compile_mode="default")
    cached = [g.model for g in groups if g.rung.name == "+step_cache"]
    assert cached == ["flux-schnell"]  # the UNet families have none in diffusers; klein crashes in it (below)
    order = [g.rung.name for g in groups if g.model == "flux-schnell" and not g.headline]
    assert order.index("+step_cache") < order.index("+compile default")  # eager rungs before any compile

    klein = [g.rung.name for g in groups if g.model == "flux2-klein-4b"]
    assert klein == ["eager (SDPA)", "+fuse_qkv", "+channels_last", "+compile default"]


def test_the_first_block_cache_still_fails_on_klein_so_its_ladder_has_no_step_cache_rung():
    """When diffusers fixes it, this fails: give klein its +step_cache rung (app/backends/step_cache.py)."""
    from app.backends.step_cache import enable_step_cache, unsupported_reason
    from app.bench.gpu_models import build_pipeline

    assert unsupported_reason("Flux2Transformer2DModel") is not None
    with tempfile.TemporaryDirectory() as tokenizer_dir:
        pipe = build_pipeline(
            MODELS["flux2-klein-4b"],
            device=torch.device("cpu"),
            dtype=torch.float32,
            tokenizer_dir=Path(tokenizer_dir),
            max_sequence_length=512,
            dry=True,
        )
    enable_step_cache(pipe.transformer, 0.05)
    with pytest.raises(TypeError):  # diffusers 0.42.1: "unsupported operand type(s) for -: 'Tensor' and 'list'"
        pipe(prompt="a lighthouse", height=64, width=64, num_inference_steps=2, guidance_scale=1.0, output_type="pt")
