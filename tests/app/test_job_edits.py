"""A job that edits an image (init_image, mask_image, strength as on /v1/generate), through the real HTTP stack on
the local jobs backend with the built-in model: the same image as /v1/generate draws; a bad image is refused at
submission, not found out by the worker later."""

from __future__ import annotations

import base64
import io

import httpx
import pytest
from PIL import Image

from app.backends.selection import load_backend
from tests.app.jobs_server import serve_jobs
from tests.app.test_image_edits import bomb_png, hole_mask, picture


@pytest.fixture(scope="module")
def jobs_server(tmp_path_factory):
    with (
        serve_jobs(tmp_path_factory.mktemp("job-edits"), load_backend) as live,
        httpx.Client(base_url=live.url, timeout=120) as client,
    ):
        yield live, client


def test_a_job_edits_its_init_image_as_generate_does(jobs_server):
    live, client = jobs_server
    body = {
        "prompt": "a fox",
        "init_image": base64.b64encode(picture()).decode(),
        "mask_image": base64.b64encode(hole_mask()).decode(),
        "strength": 0.9,
        "width": 64,
        "height": 64,
        "steps": 3,
        "seed": 21,
    }
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    status = live.wait_for(client, submitted.json()["id"])
    assert status["state"] == "succeeded", status
    from_job = httpx.get(status["image_url"]).content
    assert Image.open(io.BytesIO(from_job)).size == (64, 64)
    direct = client.post("/v1/generate", json=body)
    assert direct.status_code == 200
    job_pixels = Image.open(io.BytesIO(from_job)).tobytes()
    direct_pixels = Image.open(io.BytesIO(direct.content)).tobytes()
    assert max(abs(a - b) for a, b in zip(job_pixels, direct_pixels, strict=True)) <= 2  # app/batching.py's bound


def test_a_bad_init_image_is_refused_at_submission(jobs_server):
    _, client = jobs_server
    body = {"prompt": "a fox", "init_image": base64.b64encode(bomb_png(5000, 5000)).decode()}
    refused = client.post("/v1/jobs", json=body)
    assert refused.status_code == 422 and "5000x5000 pixels" in refused.json()["error"]
