"""A client generated from the live /openapi.json by openapi-python-client, called without any edit.

The generator runs on the spec the server serves, into a temporary folder (about 2 s), and the client
runs with `raise_on_unexpected_status=True`, so any status the spec does not document fails the test.
"""

from __future__ import annotations

import base64
import importlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import httpx
import pytest
from PIL import Image

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import JobsServer, serve_jobs

PACKAGE = "sd_generated_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsServer]:
    # The UI on, as in production: the spec and the routes are those of the whole app.
    with serve_jobs(tmp_path_factory.mktemp("generated-client"), lambda _s: FakeBackend(), ui=True) as live:
        yield live


@pytest.fixture(scope="module")
def client_package(server: JobsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    out = tmp_path_factory.mktemp("openapi-client")
    (out / "openapi.json").write_bytes(httpx.get(f"{server.url}/openapi.json", timeout=10).content)
    # The generator formats its output with ruff when it finds it on PATH (the venv's).
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # --fail-on-warning: the generator skips an operation it cannot parse with only a warning (and exit 0).
    command = [str(GENERATOR), "generate", "--path", "openapi.json", "--meta", "none", "--output-path", PACKAGE]
    command.append("--fail-on-warning")
    generated = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "WARNING" not in generated.stdout + generated.stderr, generated.stdout + generated.stderr
    sys.path.insert(0, str(out))
    try:

        def module(name: str) -> ModuleType:
            return importlib.import_module(f"{PACKAGE}.{name}")

        yield SimpleNamespace(
            client=module("client").Client(base_url=server.url, raise_on_unexpected_status=True),
            models=module("models"),
            types=module("types"),
            generate=module("api.generate.generate_v1_generate_post"),
            submit_job=module("api.jobs.submit_job_v1_jobs_post"),
            get_job=module("api.jobs.get_job_v1_jobs_job_id_get"),
            get_job_image=module("api.jobs.get_job_image_v1_jobs_job_id_image_get"),
            images=module("api.openai.images_generations_v1_images_generations_post"),
        )
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_generate_returns_the_png_to_a_generated_client(client_package):
    api = client_package
    body = api.models.GenerateRequest(prompt="a lighthouse at dusk", width=72, seed=42)
    response = api.generate.sync_detailed(client=api.client, body=body)
    assert response.status_code == 200
    assert isinstance(response.parsed, api.types.File)
    image = Image.open(io.BytesIO(response.parsed.payload.read()))
    assert (image.format, image.size) == ("PNG", (72, 64))
    assert response.headers["X-Seed"] == "42"


def test_invalid_input_parses_as_the_documented_error(client_package):
    api = client_package
    response = api.generate.sync_detailed(client=api.client, body=api.models.GenerateRequest(prompt="a fox", steps=0))
    assert response.status_code == 422
    error = response.parsed
    assert isinstance(error, api.models.ErrorResponse)
    assert error.error == "invalid request: steps: Input should be greater than or equal to 1"
    assert [(d.field, d.message) for d in error.detail] == [("steps", "Input should be greater than or equal to 1")]


def test_openais_images_route_is_in_the_generated_client(client_package):
    api = client_package
    body = api.models.ImagesGenerationsV1ImagesGenerationsPostImagesGenerationRequest(prompt="a fox", n=2, seed=5)
    response = api.images.sync_detailed(client=api.client, body=body)
    assert response.status_code == 200
    assert isinstance(response.parsed, api.models.ImagesResponse)
    images = [Image.open(io.BytesIO(base64.b64decode(item.b64_json))) for item in response.parsed.data]
    assert [image.format for image in images] == ["PNG", "PNG"]


def test_a_job_from_submit_to_its_image_link(client_package):
    api = client_package
    accepted = api.submit_job.sync(client=api.client, body=api.models.GenerateRequest(prompt="a fox", seed=7))
    assert isinstance(accepted, api.models.JobAccepted)
    deadline = time.monotonic() + 30
    status = api.get_job.sync(client=api.client, job_id=accepted.id)
    while status.state.value not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
        status = api.get_job.sync(client=api.client, job_id=accepted.id)
    assert isinstance(status, api.models.JobStatus)
    assert (status.state.value, status.seed) == ("succeeded", 7)
    assert httpx.get(status.image_url, timeout=10).headers["content-type"] == "image/png"
    # The image link through the generated client too: its 200 is documented, so it parses as bytes.
    query = httpx.URL(status.image_url).params
    image = api.get_job_image.sync_detailed(
        client=api.client, job_id=accepted.id, expires=int(query["expires"]), signature=query["signature"]
    )
    assert image.status_code == 200 and isinstance(image.parsed, api.types.File)
    assert Image.open(io.BytesIO(image.parsed.payload.read())).format == "PNG"


def test_the_image_link_route_answers_its_documented_422(client_package):
    api = client_package
    response = api.get_job_image.sync_detailed(client=api.client, job_id="0" * 32, expires="soon")
    assert response.status_code == 422
    assert isinstance(response.parsed, api.models.ErrorResponse)
    assert response.parsed.detail[0].field == "query.expires"


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        ("*/*", "image/png"),  # curl, HTTP libraries, generated clients
        (None, "image/png"),
        ("image/png", "image/png"),
        ("application/json", "application/json"),
        ("application/octet-stream", "application/octet-stream"),
        ("image/png, application/octet-stream", "image/png"),
    ],
)
def test_each_documented_media_type_is_served_on_request(server: JobsServer, accept: str | None, media_type: str):
    headers = {"Accept": accept} if accept is not None else {}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        if accept is None:
            client.headers.pop("Accept")
        response = client.post("/v1/generate", json={"prompt": "a fox"}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    spec = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    assert media_type in spec["paths"]["/v1/generate"]["post"]["responses"]["200"]["content"]
