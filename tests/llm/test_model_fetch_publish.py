"""model_fetch.publish against S3 (moto): the files, then the marker; never a marker over nothing; a prefix that
is already complete is left alone. (tests/rehearsal/test_llm_publish.py runs it as the compile Job's pod does.)"""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from common.model_store.layout import COMPLETE_MARKER
from model_fetch import publish

BUCKET = "model-store"
PREFIX = "compiled-llm/qwen--qwen2.5-1.5b-instruct/sdk2.28.0-tp2-len4096-seqs8-0123456789/"


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def keys(s3):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_uploads_every_file_then_a_marker_naming_them_and_the_meta(s3, tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "model.pt").write_bytes(b"neff")
    (tmp_path / "weights" / "tp0.safetensors").write_bytes(b"w")
    argv = [f"--bucket={BUCKET}", f"--prefix={PREFIX}", f"--src={tmp_path}", "--meta=tensor_parallel=2"]
    assert publish.main(argv, s3=s3) == 0
    assert keys(s3) == [PREFIX + COMPLETE_MARKER, PREFIX + "model.pt", PREFIX + "weights/tp0.safetensors"]
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER)["Body"].read())
    assert marker == {"tensor_parallel": "2", "files": ["model.pt", "weights/tp0.safetensors"]}


def test_an_empty_or_missing_folder_is_an_error_and_no_marker(s3, tmp_path, caplog):
    assert publish.main([f"--bucket={BUCKET}", f"--prefix={PREFIX}", f"--src={tmp_path}"], s3=s3) == 1
    assert publish.main([f"--bucket={BUCKET}", f"--prefix={PREFIX}", f"--src={tmp_path / 'none'}"], s3=s3) == 1
    assert keys(s3) == []
    assert "holds no files" in caplog.text and "is not a directory" in caplog.text


def test_a_complete_prefix_is_left_alone(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER, Body=b"{}")
    (tmp_path / "model.pt").write_bytes(b"other")
    assert publish.main([f"--bucket={BUCKET}", f"--prefix={PREFIX}", f"--src={tmp_path}"], s3=s3) == 0
    assert keys(s3) == [PREFIX + COMPLETE_MARKER]


def test_a_prefix_without_its_slash_and_a_bad_meta_are_refused(s3, tmp_path):
    (tmp_path / "model.pt").write_bytes(b"neff")
    assert publish.main([f"--bucket={BUCKET}", f"--prefix={PREFIX.rstrip('/')}", f"--src={tmp_path}"], s3=s3) == 1
    with pytest.raises(SystemExit):
        publish.main([f"--bucket={BUCKET}", f"--prefix={PREFIX}", f"--src={tmp_path}", "--meta=novalue"], s3=s3)
    assert keys(s3) == []
