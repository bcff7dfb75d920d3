"""Staging weights into the model store (against moto S3, a local folder standing in for the Hub)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import boto3
import huggingface_hub
import pytest
from moto import mock_aws

from common.model_store import stage as st
from common.model_store.layout import COMPLETE_MARKER, weights_prefix

BUCKET = "model-store"
MODEL = "org/tiny-sd"
PREFIX = weights_prefix(MODEL)
REPO_ROOT = Path(__file__).resolve().parents[2]

# The files of a Stable Diffusion 2.1-base style repository on the Hub (names only).
HUB_LISTING = [
    ".gitattributes",
    "README.md",
    "model_index.json",
    "v2-1_512-ema-pruned.ckpt",
    "v2-1_512-ema-pruned.safetensors",
    "feature_extractor/preprocessor_config.json",
    "scheduler/scheduler_config.json",
    "text_encoder/config.json",
    "text_encoder/model.safetensors",
    "text_encoder/model.fp16.safetensors",
    "text_encoder/pytorch_model.bin",
    "tokenizer/merges.txt",
    "tokenizer/special_tokens_map.json",
    "tokenizer/tokenizer_config.json",
    "tokenizer/vocab.json",
    "unet/config.json",
    "unet/diffusion_pytorch_model.safetensors",
    "unet/diffusion_pytorch_model.fp16.safetensors",
    "unet/diffusion_pytorch_model.bin",
    "vae/config.json",
    "vae/diffusion_pytorch_model.bin",
    "vae/flax_model.msgpack",
]
EXPECTED = [
    "model_index.json",
    "feature_extractor/preprocessor_config.json",
    "scheduler/scheduler_config.json",
    "text_encoder/config.json",
    "text_encoder/model.safetensors",
    "tokenizer/merges.txt",
    "tokenizer/special_tokens_map.json",
    "tokenizer/tokenizer_config.json",
    "tokenizer/vocab.json",
    "unet/config.json",
    "unet/diffusion_pytorch_model.safetensors",
    "vae/config.json",
    "vae/diffusion_pytorch_model.bin",  # the only format this folder has
]


class RecordingS3:
    """The real (moto) client, recording the order of writes."""

    def __init__(self, client):
        self._client = client
        self.writes: list[str] = []

    def upload_file(self, filename, bucket, key):
        self.writes.append(key)
        return self._client.upload_file(filename, bucket, key)

    def put_object(self, **kwargs):
        self.writes.append(kwargs["Key"])
        return self._client.put_object(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield RecordingS3(client)


def write_repo(root: Path, files: list[str]) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode() * 3)
    return root


def keys(s3):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX)
    return sorted(o["Key"][len(PREFIX) :] for page in pages for o in page.get("Contents", []))


def test_select_weight_files_keeps_one_pipeline_and_drops_checkpoints_and_variants():
    assert st.select_weight_files(HUB_LISTING) == EXPECTED


def test_a_repo_without_model_index_is_refused():
    with pytest.raises(st.StageError, match=r"model_index\.json"):
        st.select_weight_files(["unet/config.json", "v1-5.ckpt"])


def test_stage_publishes_the_pipeline_and_writes_the_marker_last(s3, tmp_path):
    source = write_repo(tmp_path / "repo", HUB_LISTING)
    status = st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3)
    assert status == 0
    assert keys(s3) == sorted([*EXPECTED, COMPLETE_MARKER])
    assert s3.writes[-1] == PREFIX + COMPLETE_MARKER
    body = s3.get_object(Bucket=BUCKET, Key=PREFIX + "unet/diffusion_pytorch_model.safetensors")["Body"].read()
    assert body == (source / "unet/diffusion_pytorch_model.safetensors").read_bytes()
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER)["Body"].read())
    assert marker["files"] == sorted(EXPECTED)
    assert marker["bytes"] == sum((source / f).stat().st_size for f in EXPECTED)


def test_a_second_run_finds_the_marker_and_uploads_nothing(s3, tmp_path):
    source = write_repo(tmp_path / "repo", HUB_LISTING)
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3) == 0
    s3.writes.clear()

    def must_not_fetch(scratch):
        raise AssertionError("a staged model must not be downloaded again")

    assert st.stage(s3, bucket=BUCKET, prefix=PREFIX, fetch=must_not_fetch, scratch=tmp_path) is False
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3) == 0
    assert s3.writes == []


def test_an_unfinished_earlier_upload_is_redone_and_its_leftovers_removed(s3, tmp_path):
    source = write_repo(tmp_path / "repo", HUB_LISTING)
    # An interrupted run: a truncated weight file, a file of another revision, and no marker.
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "unet/diffusion_pytorch_model.safetensors", Body=b"trunc")
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "unet/old_weights.bin", Body=b"old")
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3) == 0
    assert keys(s3) == sorted([*EXPECTED, COMPLETE_MARKER])
    body = s3.get_object(Bucket=BUCKET, Key=PREFIX + "unet/diffusion_pytorch_model.safetensors")["Body"].read()
    assert body == (source / "unet/diffusion_pytorch_model.safetensors").read_bytes()


def test_a_folder_that_is_not_a_pipeline_fails_with_one_line_and_stages_nothing(s3, tmp_path, caplog):
    source = write_repo(tmp_path / "repo", ["unet/config.json", "sd.ckpt"])
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3) == 1
    assert "model_index.json" in caplog.text
    assert keys(s3) == []


def test_a_model_id_outside_one_prefix_is_refused(s3, tmp_path):
    assert st.main(["--bucket", BUCKET, "--model-id", "../etc", "--from-dir", str(tmp_path)], s3=s3) == 1


def test_hub_download_uses_the_pinned_huggingface_hub_api(s3, tmp_path, monkeypatch):
    """The Hub path, with the network calls replaced by stand-ins that bind the real signatures."""
    real_info = inspect.signature(huggingface_hub.HfApi.model_info)
    real_snapshot = inspect.signature(huggingface_hub.snapshot_download)
    calls = {}

    def model_info(self, *args, **kwargs):
        real_info.bind(self, *args, **kwargs)
        calls["info"] = (args, kwargs)
        siblings = [huggingface_hub.hf_api.RepoSibling(rfilename=f) for f in HUB_LISTING]
        return huggingface_hub.hf_api.ModelInfo(id=args[0], sha="abc123", siblings=[s.__dict__ for s in siblings])

    def snapshot_download(*args, **kwargs):
        real_snapshot.bind(*args, **kwargs)
        calls["snapshot"] = (args, kwargs)
        write_repo(Path(kwargs["local_dir"]), kwargs["allow_patterns"])
        return str(kwargs["local_dir"])

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--work-dir", str(tmp_path)], s3=s3) == 0
    assert calls["info"] == ((MODEL,), {"revision": None, "token": "hf_secret"})
    assert calls["snapshot"][1]["revision"] == "abc123"  # the commit read once, so the files agree
    assert calls["snapshot"][1]["allow_patterns"] == EXPECTED
    assert keys(s3) == sorted([*EXPECTED, COMPLETE_MARKER])
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER)["Body"].read())
    assert (marker["source"], marker["revision"]) == (f"hf://{MODEL}", "abc123")
    assert "hf_secret" not in json.dumps(marker)


def test_the_staging_build_installs_the_huggingface_hub_the_tests_ran_against():
    pins = dict(
        line.split("==")
        for line in (REPO_ROOT / "requirements-stage.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["huggingface_hub"] == huggingface_hub.__version__
    assert pins["boto3"] == boto3.__version__


def test_a_gated_model_without_token_says_how_to_give_one(s3, tmp_path, monkeypatch, caplog):
    import httpx2

    def gated(self, *args, **kwargs):
        request = httpx2.Request("GET", f"https://huggingface.co/api/models/{MODEL}")
        raise huggingface_hub.errors.GatedRepoError(
            "401 gated", response=httpx2.Response(401, request=request, headers={"X-Error-Code": "GatedRepo"})
        )

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", gated)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--work-dir", str(tmp_path)], s3=s3) == 1
    assert "servingHubTokenSecretName" in caplog.text
    assert keys(s3) == []


def test_weights_staged_at_another_pinned_commit_stop_staging_naming_the_revision(s3, tmp_path, caplog):
    source = write_repo(tmp_path / "weights", EXPECTED)
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--from-dir", str(source)], s3=s3) == 0
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER)["Body"].read())
    marker["revision"] = "a" * 40
    s3.put_object(Bucket=BUCKET, Key=PREFIX + COMPLETE_MARKER, Body=json.dumps(marker).encode())
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--revision", "b" * 40], s3=s3) == 1
    assert f"holds revision {'a' * 40}, but servingModelRevision is {'b' * 40}" in caplog.text
    # The same commit, or a branch name that moves, keeps what is staged.
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--revision", "a" * 40], s3=s3) == 0
    assert st.main(["--bucket", BUCKET, "--model-id", MODEL, "--revision", "main"], s3=s3) == 0


QWEN_LISTING = [
    ".gitattributes",
    "LICENSE",
    "README.md",
    "config.json",
    "generation_config.json",
    "merges.txt",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "onnx/model.onnx",
    "original/consolidated.00.pth",
    "qwen2.5-1.5b-instruct-q4_k_m.gguf",
    "pytorch_model.bin",
]


def test_a_language_model_keeps_its_configs_tokenizer_and_one_weight_format():
    assert st.select_transformers_files(QWEN_LISTING) == [
        "config.json",
        "generation_config.json",
        "merges.txt",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
    ]
    sharded = [
        "config.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
        "pytorch_model.bin.index.json",
    ]
    assert st.select_transformers_files(sharded) == sorted(sharded)


def test_a_repo_without_a_top_level_config_is_not_a_language_model():
    with pytest.raises(st.StageError, match=r"no config\.json at the top: not a transformers-layout model"):
        st.select_transformers_files(["model_index.json", "unet/config.json"])
