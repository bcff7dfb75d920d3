"""`python -m model_fetch`, the LLM pods' init container, run as its own process against a moto server: it copies
the prefixes it is given, waits for a completion marker when told to, and every failure is one JSON log line and
its own exit status, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from common.model_store.layout import COMPLETE_MARKER
from common.model_store.marker import write_marker

pytestmark = pytest.mark.process  # runs a program of ours as a process per test (docs/testing.md)

REPO_ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
WEIGHTS = {"config.json": b'{"model_type": "qwen2"}', "model.safetensors": os.urandom(300_000), "sub/tok.json": b"{}"}
ARTIFACTS = {"model.pt": os.urandom(120_000), "neuron_config.json": b'{"tp_degree": 2}'}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint: str) -> Any:
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test"
    )


@pytest.fixture
def bucket(s3: Any, request: pytest.FixtureRequest) -> str:
    name = "store-" + request.node.name.replace("_", "-").lower()[:40]
    s3.create_bucket(Bucket=name)
    return name


def put(s3: Any, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    for relative, body in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + relative, Body=body)


def run(endpoint: str, tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
    }
    command = [sys.executable, "-m", "model_fetch", *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def log_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stderr.splitlines() if line.strip()]


def the_error(result: subprocess.CompletedProcess[str], status: int) -> str:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    (error,) = [line for line in log_lines(result) if line["level"] == "error"]
    assert "traceback" not in error
    return error["message"]


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_copies_the_weights_into_the_folder(endpoint, s3, bucket, tmp_path):
    put(s3, bucket, "models/qwen/", WEIGHTS)
    put(s3, bucket, "models/qwen-other/", {"stray.bin": b"not this model"})  # a sibling prefix, not copied
    dest = tmp_path / "models" / "weights"
    result = run(endpoint, tmp_path, f"--bucket={bucket}", "--prefix=models/qwen", f"--dest={dest}")
    assert result.returncode == 0, result.stderr
    copied = tree(dest)
    assert {k: v for k, v in copied.items() if not k.startswith(".")} == WEIGHTS
    assert not [p for p in dest.rglob("*.partial")]
    assert any(f"s3://{bucket}/models/qwen/ is in {dest}" == line["message"] for line in log_lines(result))


def test_waits_for_the_marker_then_copies_weights_and_artifacts(endpoint, s3, bucket, tmp_path):
    put(s3, bucket, "models/qwen/", WEIGHTS)
    put(s3, bucket, "compiled/qwen/tp2/", ARTIFACTS)

    def publish_later() -> None:  # the compile Job finishes while the pod waits
        time.sleep(1.5)
        write_marker(s3, bucket, "compiled/qwen/tp2/", {"files": sorted(ARTIFACTS)})

    writer = threading.Thread(target=publish_later)
    writer.start()
    weights, artifacts = tmp_path / "m" / "weights", tmp_path / "m" / "neuron-compiled"
    started = time.monotonic()
    result = run(
        endpoint,
        tmp_path,
        f"--bucket={bucket}",
        "--wait-marker-prefix=compiled/qwen/tp2/",
        "--timeout-s=30",
        "--poll-s=0.3",
        "--prefix=models/qwen/",
        f"--dest={weights}",
        "--prefix=compiled/qwen/tp2/",
        f"--dest={artifacts}",
    )
    writer.join()
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 1.5  # it did wait
    assert any("waiting for" in line["message"] for line in log_lines(result))
    assert {k: v for k, v in tree(weights).items() if not k.startswith(".")} == WEIGHTS
    fetched = tree(artifacts)
    assert {k: v for k, v in fetched.items() if not k.startswith(".") and k != COMPLETE_MARKER} == ARTIFACTS


def test_a_marker_that_never_comes_is_exit_3_naming_its_key(endpoint, s3, bucket, tmp_path):
    put(s3, bucket, "compiled/qwen/tp2/", ARTIFACTS)  # files, but the compile never finished
    dest = tmp_path / "a"
    result = run(
        endpoint,
        tmp_path,
        f"--bucket={bucket}",
        "--wait-marker-prefix=compiled/qwen/tp2",
        "--timeout-s=1",
        "--poll-s=0.2",
        "--prefix=compiled/qwen/tp2",
        f"--dest={dest}",
    )
    message = the_error(result, 3)
    assert message == f"s3://{bucket}/compiled/qwen/tp2/{COMPLETE_MARKER} did not appear within 1 s"
    assert not dest.exists()  # nothing copied from an unfinished prefix


def test_an_empty_prefix_is_exit_1_naming_it(endpoint, s3, bucket, tmp_path):
    message = the_error(run(endpoint, tmp_path, f"--bucket={bucket}", "--prefix=models/none/", "--dest=/nowhere"), 1)
    assert message == f"fetching from s3://{bucket} failed: no objects under s3://{bucket}/models/none/"


def test_a_missing_bucket_is_exit_1_in_one_line(endpoint, tmp_path):
    result = run(endpoint, tmp_path, "--bucket=no-such-bucket", "--prefix=models/q/", f"--dest={tmp_path / 'd'}")
    message = the_error(result, 1)
    assert message.startswith("fetching from s3://no-such-bucket failed: ") and "NoSuchBucket" in message


def test_with_the_artifacts_already_complete_it_fetches_nothing_and_says_so(endpoint, s3, bucket, tmp_path):
    # The LLM compile Job's first step: a renamed Job whose artifacts are published compiles nothing.
    put(s3, bucket, "models/m/", WEIGHTS)
    put(s3, bucket, "compiled/m/", ARTIFACTS)
    write_marker(s3, bucket, "compiled/m/", {"files": sorted(ARTIFACTS)})
    flag, dest = tmp_path / "already-published", tmp_path / "weights"
    skip = ["--skip-if-marker-prefix=compiled/m/", f"--skipped-flag={flag}"]
    result = run(endpoint, tmp_path, f"--bucket={bucket}", "--prefix=models/m/", f"--dest={dest}", *skip)
    assert result.returncode == 0, result.stderr
    assert flag.is_file() and not dest.exists()
    assert "already complete: nothing to fetch" in log_lines(result)[-1]["message"]
    # Without the marker it fetches as always and leaves no flag.
    flag.unlink()
    s3.delete_object(Bucket=bucket, Key=f"compiled/m/{COMPLETE_MARKER}")
    result = run(endpoint, tmp_path, f"--bucket={bucket}", "--prefix=models/m/", f"--dest={dest}", *skip)
    assert result.returncode == 0, result.stderr
    assert not flag.exists() and {k: v for k, v in tree(dest).items() if not k.startswith(".")} == WEIGHTS


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--prefix=a/", "--dest=/x", "--prefix=b/"], "2 --prefix but 1 --dest"),
        (["--prefix=/", "--dest=/x"], "--prefix must not be empty"),
        (["--prefix=a/", "--dest=/x", "--poll-s=0"], "--poll-s above 0"),
        (["--prefix=a/", "--dest=/x", "--skip-if-marker-prefix=c/"], "--skip-if-marker-prefix and --skipped-flag go"),
    ],
    ids=["unpaired", "empty-prefix", "zero-poll", "skip-without-flag"],
)
def test_bad_arguments_are_exit_2_with_the_reason(endpoint, tmp_path, args, expected):
    result = run(endpoint, tmp_path, "--bucket=b", *args)
    assert result.returncode == 2 and expected in result.stderr.splitlines()[-1], result.stderr
