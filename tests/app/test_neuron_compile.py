"""The compile job around optimum-neuron: arguments, keys, upload, skip, wait. Neuron itself does not run here."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from app.model_store import neuron_compile as nc
from common.model_store.layout import COMPLETE_MARKER, CompileShape, compiled_prefix, weights_prefix

BUCKET = "model-store"
MODEL = "org/tiny-sd"
SHAPE = CompileShape(1, 512, 512)


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def stage_weights(s3):
    for key, body in {"model_index.json": b"{}", "unet/config.json": b"{}", "unet/weights.bin": b"\x00" * 16}.items():
        s3.put_object(Bucket=BUCKET, Key=weights_prefix(MODEL) + key, Body=body)


def fake_compile(calls):
    def run(weights_dir: Path, shape: CompileShape, out_dir: Path) -> None:
        calls.append(
            (
                # The model files; the downloader's own dot-file (its ETag record) is not one.
                sorted(
                    p.relative_to(weights_dir).as_posix()
                    for p in weights_dir.rglob("*")
                    if p.is_file() and not p.name.startswith(".")
                ),
                shape,
            )
        )
        (out_dir / "unet").mkdir(parents=True)
        (out_dir / "unet" / "model.neuron").write_bytes(b"neff")
        (out_dir / "model_index.json").write_text("{}")

    return run


def keys(s3, prefix):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_compile_uploads_under_the_shape_key_and_writes_marker_last(s3, tmp_path):
    stage_weights(s3)
    calls = []
    prefix = nc.compile_and_publish(
        s3,
        bucket=BUCKET,
        model_id=MODEL,
        sdk_version="2.31.1",
        shape=SHAPE,
        work_dir=tmp_path,
        compile_fn=fake_compile(calls),
    )
    assert prefix == compiled_prefix(MODEL, "2.31.1", SHAPE)
    assert calls == [(["model_index.json", "unet/config.json", "unet/weights.bin"], SHAPE)]
    assert keys(s3, prefix) == [prefix + COMPLETE_MARKER, prefix + "model_index.json", prefix + "unet/model.neuron"]
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + COMPLETE_MARKER)["Body"].read())
    assert marker["files"] == ["model_index.json", "unet/model.neuron"]
    assert (marker["batch_size"], marker["height"], marker["width"], marker["neuron_sdk_version"]) == (
        1,
        512,
        512,
        "2.31.1",
    )


def test_already_compiled_is_skipped(s3, tmp_path):
    stage_weights(s3)
    prefix = compiled_prefix(MODEL, "2.31.1", SHAPE)
    s3.put_object(Bucket=BUCKET, Key=prefix + COMPLETE_MARKER, Body=b"{}")
    calls = []
    nc.compile_and_publish(
        s3,
        bucket=BUCKET,
        model_id=MODEL,
        sdk_version="2.31.1",
        shape=SHAPE,
        work_dir=tmp_path,
        compile_fn=fake_compile(calls),
    )
    assert calls == []
    assert keys(s3, prefix) == [prefix + COMPLETE_MARKER]


def test_another_shape_or_sdk_is_not_skipped(s3, tmp_path):
    stage_weights(s3)
    s3.put_object(Bucket=BUCKET, Key=compiled_prefix(MODEL, "2.31.1", SHAPE) + COMPLETE_MARKER, Body=b"{}")
    calls = []
    nc.compile_and_publish(
        s3,
        bucket=BUCKET,
        model_id=MODEL,
        sdk_version="2.32.0",
        shape=SHAPE,
        work_dir=tmp_path,
        compile_fn=fake_compile(calls),
    )
    assert len(calls) == 1


def test_missing_weights_say_how_to_stage(s3, tmp_path):
    with pytest.raises(nc.CompileError, match="the deploy stages them"):
        nc.compile_and_publish(
            s3,
            bucket=BUCKET,
            model_id=MODEL,
            sdk_version="2.31.1",
            shape=SHAPE,
            work_dir=tmp_path,
            compile_fn=fake_compile([]),
        )


def test_nothing_written_is_an_error_and_no_marker(s3, tmp_path):
    stage_weights(s3)
    with pytest.raises(nc.CompileError, match="wrote nothing"):
        nc.compile_and_publish(
            s3,
            bucket=BUCKET,
            model_id=MODEL,
            sdk_version="2.31.1",
            shape=SHAPE,
            work_dir=tmp_path,
            compile_fn=lambda *a: None,
        )
    assert not nc.is_compiled(s3, BUCKET, compiled_prefix(MODEL, "2.31.1", SHAPE))


def test_without_optimum_neuron_the_error_is_clear(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "optimum.neuron", None)  # importing it raises ImportError
    with pytest.raises(nc.CompileError, match="Neuron image"):
        nc.optimum_compile(tmp_path, SHAPE, tmp_path / "out")


def test_wait_returns_once_marker_exists_and_times_out_otherwise(s3):
    prefix = compiled_prefix(MODEL, "2.31.1", SHAPE)
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            s3.put_object(Bucket=BUCKET, Key=prefix + COMPLETE_MARKER, Body=b"{}")

    nc.wait_for_compiled(s3, bucket=BUCKET, prefix=prefix, timeout_s=100, poll_s=7, sleep=sleep, clock=lambda: 0.0)
    assert sleeps == [7, 7]
    ticks = iter(range(0, 1000, 10))
    with pytest.raises(nc.CompileError, match="did not appear"):
        nc.wait_for_compiled(
            s3,
            bucket=BUCKET,
            prefix="compiled/other/",
            timeout_s=30,
            poll_s=1,
            sleep=lambda s: None,
            clock=lambda: next(ticks),
        )


def test_cli_parses_and_reports_errors_as_exit_status(s3, caplog):
    args = nc.parse_args(
        [
            "compile",
            "--bucket=b",
            "--model-id=o/m",
            "--sdk-version=2.31.1",
            "--batch-size=2",
            "--height=768",
            "--width=512",
        ]
    )
    assert (args.batch_size, args.height, args.width, args.work_dir) == (2, 768, 512, None)
    with pytest.raises(SystemExit):
        nc.parse_args(["compile", "--bucket=b"])
    rc = nc.main(
        [
            "compile",
            f"--bucket={BUCKET}",
            f"--model-id={MODEL}",
            "--sdk-version=2.31.1",
            "--batch-size=1",
            "--height=512",
            "--width=512",
        ],
        s3=s3,
    )
    assert rc == 1 and "the deploy stages them" in caplog.text
    s3.put_object(Bucket=BUCKET, Key="compiled/x/" + COMPLETE_MARKER, Body=b"{}")
    assert nc.main(["wait", f"--bucket={BUCKET}", "--prefix=compiled/x", "--timeout-s=1"], s3=s3) == 0


def test_bring_your_own_weights_are_compiled_from_their_own_bucket(s3, tmp_path):
    s3.create_bucket(Bucket="my-weights")
    s3.put_object(Bucket="my-weights", Key="sd/v2/model_index.json", Body=b"{}")
    s3.put_object(Bucket="my-weights", Key="sd/v2/unet/weights.bin", Body=b"\x00")
    calls = []
    prefix = nc.compile_and_publish(
        s3,
        bucket=BUCKET,
        model_id="s3://my-weights/sd/v2/",
        sdk_version="2.31.1",
        shape=SHAPE,
        work_dir=tmp_path,
        compile_fn=fake_compile(calls),
    )
    assert calls[0][0] == ["model_index.json", "unet/weights.bin"]
    assert prefix.startswith("compiled/s3-v2-") and keys(s3, prefix)[0] == prefix + COMPLETE_MARKER
