"""The compile job around optimum-neuron: arguments, per-size keys, upload, skip, wait. Neuron does not run here."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from app.model_store import neuron_compile as nc
from app.models.families import FLUX_SCHNELL, SD, SDXL
from common.lora_keys import fused_variant, parse_lora_keys
from common.model_store.layout import (
    COMPLETE_MARKER,
    CompileShape,
    ImageSize,
    compiled_prefix,
    loras_prefix,
    weights_prefix,
)

BUCKET = "model-store"
MODEL = "org/tiny-sdxl"
SQUARE, PORTRAIT, LANDSCAPE = ImageSize(1024, 1024), ImageSize(896, 1152), ImageSize(1152, 896)
SIZES = (SQUARE, PORTRAIT, LANDSCAPE)
PREFIX = compiled_prefix(MODEL, "2.26.1", 1, 2)


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def stage_weights(s3, pipeline_class="StableDiffusionXLPipeline", bucket=BUCKET, prefix=None):
    prefix = weights_prefix(MODEL) if prefix is None else prefix
    index = json.dumps({"_class_name": pipeline_class}).encode()
    for key, body in {"model_index.json": index, "unet/config.json": b"{}", "unet/weights.bin": b"\x00" * 16}.items():
        s3.put_object(Bucket=bucket, Key=prefix + key, Body=body)


def fake_compile(calls, fail_on: ImageSize | None = None):
    def run(weights_dir: Path, spec: nc.ExportSpec, out_dir: Path) -> None:
        if fail_on is not None and (spec.shape.width, spec.shape.height) == (fail_on.width, fail_on.height):
            raise RuntimeError("neuronx-cc failed")
        # The model files; the downloader's own dot-file (its ETag record) is not one.
        files = sorted(
            p.relative_to(weights_dir).as_posix() for p in weights_dir.rglob("*") if p.is_file() and p.name[0] != "."
        )
        calls.append((files, spec, out_dir))
        (out_dir / "unet").mkdir(parents=True)
        (out_dir / "unet" / "model.neuron").write_bytes(f"neff {spec.shape.width}x{spec.shape.height}".encode())
        (out_dir / "model_index.json").write_text("{}")
        nc.compiler_workdir(out_dir).mkdir(exist_ok=True)

    return run


def keys(s3, prefix):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def compile_sizes(s3, tmp_path, sizes=SIZES, calls=None, **overrides):
    arguments = {
        "bucket": BUCKET,
        "model_id": MODEL,
        "sdk_version": "2.26.1",
        "batch_size": 1,
        "sizes": sizes,
        "tensor_parallel_size": 2,
        "work_dir": tmp_path,
        "compile_fn": fake_compile([] if calls is None else calls),
    }
    return nc.compile_and_publish(s3, **{**arguments, **overrides})


def test_each_size_is_compiled_into_its_own_folder_with_its_own_marker(s3, tmp_path):
    stage_weights(s3)
    calls = []
    prefix = compile_sizes(s3, tmp_path, calls=calls)
    assert prefix == PREFIX == "compiled/org--tiny-sdxl/neuron-sdk-2.26.1/b1-tp2/"
    assert [spec for _, spec, _ in calls] == [
        nc.ExportSpec(SDXL, CompileShape(1, 1024, 1024), 2),
        nc.ExportSpec(SDXL, CompileShape(1, 1152, 896), 2),
        nc.ExportSpec(SDXL, CompileShape(1, 896, 1152), 2),
    ]
    assert calls[0][0] == ["model_index.json", "unet/config.json", "unet/weights.bin"]
    expected = []
    for size in ("1024x1024", "1152x896", "896x1152"):
        expected += [f"{prefix}{size}/{COMPLETE_MARKER}", f"{prefix}{size}/model_index.json"]
        expected += [f"{prefix}{size}/unet/model.neuron"]
    assert keys(s3, prefix) == expected
    neff = s3.get_object(Bucket=BUCKET, Key=f"{prefix}896x1152/unet/model.neuron")["Body"].read()
    assert neff == b"neff 896x1152"
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{prefix}896x1152/{COMPLETE_MARKER}")["Body"].read())
    assert marker["files"] == ["model_index.json", "unet/model.neuron"]
    assert (marker["family"], marker["width"], marker["height"], marker["tensor_parallel_size"]) == (
        "sdxl",
        896,
        1152,
        2,
    )
    # Each size's scratch files (artifacts and the compiler's) are gone before the next compile.
    assert not (tmp_path / "compiled" / "1024x1024").exists() and not (tmp_path / "compiled" / "neuronx-cc").exists()


def test_only_the_sizes_not_yet_complete_are_compiled(s3, tmp_path):
    stage_weights(s3)
    compile_sizes(s3, tmp_path, sizes=(SQUARE,))
    calls = []
    compile_sizes(s3, tmp_path, calls=calls)
    assert [(spec.shape.width, spec.shape.height) for _, spec, _ in calls] == [(896, 1152), (1152, 896)]
    calls.clear()
    compile_sizes(s3, tmp_path, calls=calls)
    assert calls == []


def test_a_failed_size_keeps_the_finished_ones_and_leaves_its_own_unmarked(s3, tmp_path):
    stage_weights(s3)
    with pytest.raises(RuntimeError, match="neuronx-cc"):
        compile_sizes(s3, tmp_path, compile_fn=fake_compile([], fail_on=PORTRAIT))
    assert nc.missing_sizes(s3, BUCKET, PREFIX, SIZES) == [PORTRAIT, LANDSCAPE]


def test_another_sdk_batch_or_tensor_parallel_size_is_compiled_again(s3, tmp_path):
    stage_weights(s3)
    compile_sizes(s3, tmp_path, sizes=(SQUARE,))
    for overrides in ({"sdk_version": "2.27.0"}, {"batch_size": 2}, {"tensor_parallel_size": 8}):
        calls = []
        compile_sizes(s3, tmp_path, sizes=(SQUARE,), calls=calls, **overrides)
        assert len(calls) == 1, overrides


@pytest.mark.parametrize(
    ("pipeline_class", "family"),
    [("StableDiffusionPipeline", SD), ("StableDiffusionXLPipeline", SDXL), ("FluxPipeline", FLUX_SCHNELL)],
)
def test_the_family_comes_from_the_weights_model_index(s3, tmp_path, pipeline_class, family):
    stage_weights(s3, pipeline_class)
    calls = []
    compile_sizes(s3, tmp_path, sizes=(SQUARE,), calls=calls)
    assert calls[0][1].family is family


def test_a_size_the_family_cannot_make_fails_before_any_compile(s3, tmp_path):
    stage_weights(s3, "FluxPipeline")
    calls = []
    with pytest.raises(nc.CompileError, match="1000x1000: width must be a multiple of 16"):
        compile_sizes(s3, tmp_path, sizes=(SQUARE, ImageSize(1000, 1000)), calls=calls)
    assert calls == [] and keys(s3, PREFIX) == []


def test_a_guidance_embedded_flux_is_refused_before_any_compile(s3, tmp_path):
    stage_weights(s3, "FluxPipeline")
    config = json.dumps({"_class_name": "FluxTransformer2DModel", "guidance_embeds": True}).encode()
    s3.put_object(Bucket=BUCKET, Key=weights_prefix(MODEL) + "transformer/config.json", Body=config)
    calls = []
    with pytest.raises(nc.CompileError, match="embeds guidance"):
        compile_sizes(s3, tmp_path, calls=calls)
    assert calls == []


def test_an_unknown_pipeline_class_is_a_clear_error(s3, tmp_path):
    stage_weights(s3, "KandinskyPipeline")
    with pytest.raises(nc.CompileError, match="'KandinskyPipeline' is not served"):
        compile_sizes(s3, tmp_path)


def test_missing_weights_say_how_to_stage(s3, tmp_path):
    with pytest.raises(nc.CompileError, match="the deploy stages them"):
        compile_sizes(s3, tmp_path)


def test_nothing_written_is_an_error_and_no_marker(s3, tmp_path):
    stage_weights(s3)
    with pytest.raises(nc.CompileError, match="wrote nothing"):
        compile_sizes(s3, tmp_path, compile_fn=lambda *a: None)
    assert nc.missing_sizes(s3, BUCKET, PREFIX, SIZES) == list(SIZES)


def test_without_optimum_neuron_the_error_is_clear(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "optimum.neuron", None)  # importing it raises ImportError
    with pytest.raises(nc.CompileError, match="Neuron image"):
        nc.optimum_compile(tmp_path, nc.ExportSpec(SD, CompileShape(1, 512, 512), 1), tmp_path / "out")


def test_export_arguments_per_family(tmp_path):
    import torch

    sdxl = nc.export_arguments(nc.ExportSpec(SDXL, CompileShape(2, 1152, 896), 1), tmp_path / "compiled" / "896x1152")
    assert (sdxl["batch_size"], sdxl["height"], sdxl["width"], sdxl["tensor_parallel_size"]) == (2, 1152, 896, 1)
    assert (sdxl["auto_cast"], sdxl["auto_cast_type"], sdxl["export"], sdxl["disable_neuron_cache"]) == (
        "matmul",
        "bf16",
        True,
        True,
    )
    assert sdxl["compiler_workdir"] == str(tmp_path / "compiled" / "neuronx-cc")
    flux = nc.export_arguments(nc.ExportSpec(FLUX_SCHNELL, CompileShape(1, 1024, 1024), 8), tmp_path / "x")
    assert (flux["torch_dtype"], flux["auto_cast"], flux["sequence_length"]) == (torch.bfloat16, None, 256)
    assert flux["tensor_parallel_size"] == 8 and "auto_cast_type" not in flux
    assert [nc.pipeline_class_name(f) for f in (SD, SDXL, FLUX_SCHNELL)] == [
        "NeuronStableDiffusionPipeline",
        "NeuronStableDiffusionXLPipeline",
        "NeuronFluxPipeline",
    ]


def test_wait_returns_once_every_size_is_complete(s3):
    sleeps = []
    markers = iter([SQUARE, LANDSCAPE, PORTRAIT])

    def sleep(seconds):
        # One more size completes at each poll, out of order: the wait must see all three.
        sleeps.append(seconds)
        size = next(markers)
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}{size.key}/{COMPLETE_MARKER}", Body=b"{}")

    nc.wait_for_compiled(
        s3, bucket=BUCKET, prefix=PREFIX, sizes=SIZES, timeout_s=100, poll_s=7, sleep=sleep, clock=lambda: 0.0
    )
    assert sleeps == [7, 7, 7]  # until square, then two until portrait; landscape came in between
    assert nc.missing_sizes(s3, BUCKET, PREFIX, SIZES) == []


def test_wait_times_out_on_one_missing_size_with_one_deadline_for_all(s3):
    for size in (SQUARE, PORTRAIT):
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}{size.key}/{COMPLETE_MARKER}", Body=b"{}")
    ticks = iter(range(0, 1000, 10))
    with pytest.raises(nc.CompileError, match=r"1152x896/_COMPLETE.json did not appear.*1024x1024, 896x1152, 1152x896"):
        nc.wait_for_compiled(
            s3,
            bucket=BUCKET,
            prefix=PREFIX,
            sizes=SIZES,
            timeout_s=30,
            poll_s=1,
            sleep=lambda s: None,
            clock=lambda: next(ticks),
        )


def test_cli_takes_sizes_and_tensor_parallel_size_and_reports_errors_as_exit_status(s3, caplog, tmp_path, monkeypatch):
    args = nc.parse_args(
        [
            *("compile", "--bucket=b", "--model-id=o/m", "--sdk-version=2.26.1", "--batch-size=2"),
            *("--shape", "1024x1024", "--shape=896x1152", "--tensor-parallel-size=8"),
        ]
    )
    assert (args.batch_size, args.shape, args.tensor_parallel_size) == (2, ["1024x1024", "896x1152"], 8)
    defaults = nc.parse_args(
        ["compile", "--bucket=b", "--model-id=o/m", "--sdk-version=1", "--batch-size=1", "--shape=512x512"]
    )
    assert (defaults.tensor_parallel_size, defaults.work_dir) == (1, None)
    for bad in (["--batch-size=1"], ["--batch-size=1", "--shape=512x512", "--tensor-parallel-size=0"]):
        with pytest.raises(SystemExit):
            nc.parse_args(["compile", "--bucket=b", "--model-id=o/m", "--sdk-version=1", *bad])
    compile_args = ["compile", f"--bucket={BUCKET}", f"--model-id={MODEL}", "--sdk-version=2.26.1", "--batch-size=1"]
    assert nc.main([*compile_args, "--shape=1024x1024", f"--work-dir={tmp_path}"], s3=s3) == 1
    assert "the deploy stages them" in caplog.text
    for bad, message in (
        ("1024", "not of the form WIDTHxHEIGHT"),
        ("1000x1000x", "not of the form"),
        ("60x64", "width 60"),
    ):
        assert nc.main([*compile_args, f"--shape={bad}"], s3=s3) == 1
        assert message in caplog.text
    assert nc.main([*compile_args, "--shape=512x512", "--shape=512x512"], s3=s3) == 1
    assert "512x512 is given more than once" in caplog.text
    # The real CLI compiles every size into its folder (the export itself is the stand-in here).
    stage_weights(s3)
    wait = ["wait", f"--bucket={BUCKET}", f"--prefix={compiled_prefix(MODEL, '2.26.1', 1, 1)}", "--timeout-s=0"]
    assert nc.main([*wait, "--shape=512x512", "--shape=768x512"], s3=s3) == 1
    monkeypatch.setattr(nc, "optimum_compile", fake_compile([]))
    assert nc.main([*compile_args, "--shape=512x512", "--shape=768x512", f"--work-dir={tmp_path}"], s3=s3) == 0
    assert nc.main([*wait, "--shape=512x512", "--shape=768x512"], s3=s3) == 0


def test_bring_your_own_weights_are_compiled_from_their_own_bucket(s3, tmp_path):
    s3.create_bucket(Bucket="my-weights")
    stage_weights(s3, "StableDiffusionPipeline", bucket="my-weights", prefix="sd/v2/")
    calls = []
    prefix = compile_sizes(s3, tmp_path, sizes=(ImageSize(512, 512),), calls=calls, model_id="s3://my-weights/sd/v2/")
    assert calls[0][0] == ["model_index.json", "unet/config.json", "unet/weights.bin"]
    assert prefix.startswith("compiled/s3-v2-") and keys(s3, prefix)[0] == f"{prefix}512x512/{COMPLETE_MARKER}"


def test_fused_adapters_are_fetched_passed_to_the_export_and_compiled_under_their_own_prefix(s3, tmp_path):
    stage_weights(s3)
    s3.put_object(Bucket=BUCKET, Key=loras_prefix(MODEL) + "ink.safetensors", Body=b"adapter")
    calls: list = []
    fused = parse_lora_keys(["ink:0.8"])
    prefix = compile_sizes(s3, tmp_path, sizes=(SQUARE,), calls=calls, loras=fused)
    assert prefix == compiled_prefix(MODEL, "2.26.1", 1, 2, fused_variant(fused)) and prefix != PREFIX
    assert prefix.rstrip("/").endswith("-tp2-" + fused_variant(fused))
    ((_files, spec, out_dir),) = calls
    assert spec.loras == fused and (spec.lora_dir / "ink.safetensors").read_bytes() == b"adapter"
    arguments = nc.export_arguments(spec, out_dir)
    assert (arguments["lora_model_ids"], arguments["lora_weight_names"]) == ([str(spec.lora_dir)], ["ink.safetensors"])
    assert (arguments["lora_adapter_names"], arguments["lora_scales"]) == (["ink"], [0.8])
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{prefix}{SQUARE.key}/{COMPLETE_MARKER}")["Body"].read())
    assert marker["loras"] == [{"name": "ink", "scale": 0.8}]
    # Without adapters the export takes none of the LoRA arguments.
    assert not any(key.startswith("lora_") for key in nc.export_arguments(nc.ExportSpec(SD, spec.shape, 1), out_dir))


def test_a_fused_adapter_missing_from_the_store_is_named_before_any_compile(s3, tmp_path):
    stage_weights(s3)
    calls: list = []
    with pytest.raises(nc.CompileError, match=r"adapter 'wash' is not at s3://.*/loras/.*wash\.safetensors"):
        compile_sizes(s3, tmp_path, calls=calls, loras=parse_lora_keys(["wash"]))
    assert calls == []
