"""POST /v1/jobs and GET /v1/jobs/{id} through the real HTTP stack, on the local (on-disk) backend."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from PIL import Image

from app.jobs.local import LocalQueue
from tests.app.fakes import FakeBackend
from tests.app.jobs_server import serve_jobs

MAX_RECEIVES = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    backend = FakeBackend()
    tmp = tmp_path_factory.mktemp("jobs-api")
    with (
        serve_jobs(tmp, lambda _s: backend, jobs_max_receives=MAX_RECEIVES) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        yield live, backend, client


def runs_of(backend: FakeBackend, seed: int) -> int:
    return sum(1 for batch in backend.batches for p in batch if p.seed == seed and p.prompt != "warm-up")


def test_submit_then_collect_the_png_through_a_short_lived_link(server):
    live, backend, client = server
    submitted = client.post("/v1/jobs", json={"prompt": "a red fox", "seed": 1234})
    assert submitted.status_code == 202, submitted.text
    body = submitted.json()
    assert body["state"] == "queued"
    assert body["status_url"] == f"/v1/jobs/{body['id']}"
    assert submitted.headers["location"] == body["status_url"]

    status = live.wait_for(client, body["id"])
    assert status["state"] == "succeeded", status
    assert status["error"] is None and status["seed"] == 1234 and status["attempts"] == 1
    assert 60 <= status["image_url_expires_in"] <= live.settings.jobs_url_ttl_s
    # The link works without the caller's identity, like a presigned S3 URL.
    image = httpx.get(status["image_url"])
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(image.content)).size == (64, 64)
    assert runs_of(backend, 1234) == 1
    # A tampered link is refused.
    tampered = httpx.get(status["image_url"].replace("signature=", "signature=0"))
    assert tampered.status_code == 403 and "expired" in tampered.json()["error"]
    notices = [json.loads(line) for line in (live.jobs_dir / "notifications.jsonl").read_text().splitlines()]
    assert [n["state"] for n in notices if n["job_id"] == body["id"]] == ["succeeded"]


def test_validation_and_error_format_are_those_of_generate(server):
    _, _, client = server
    bodies = ({"prompt": ""}, {"prompt": "x", "steps": 10_000}, {"prompt": "x", "width": 65}, {"prompt": "x", "y": 1})
    for bad in bodies:
        job = client.post("/v1/jobs", json=bad)
        generate = client.post("/v1/generate", json=bad)
        assert job.status_code == generate.status_code == 422
        assert job.json()["error"] == generate.json()["error"]
    bad_key = client.post("/v1/jobs", json={"prompt": "x"}, headers={"Idempotency-Key": "a" * 256})
    assert bad_key.status_code == 422 and "Idempotency-Key" in bad_key.json()["error"]
    too_big = client.post("/v1/jobs", content=b"{" + b" " * 10_000 + b"}", headers={"content-type": "application/json"})
    assert too_big.status_code == 413
    assert client.get("/v1/jobs/not-a-job").status_code == 404
    assert client.get("/v1/jobs/" + "0" * 32).json() == {"error": "no such job"}


def test_an_idempotency_key_gives_one_job_and_refuses_a_different_body(server):
    live, backend, client = server
    headers = {"Idempotency-Key": "order-42"}
    first = client.post("/v1/jobs", json={"prompt": "once", "seed": 42}, headers=headers)
    again = client.post("/v1/jobs", json={"prompt": "once", "seed": 42}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert live.wait_for(client, first.json()["id"])["state"] == "succeeded"
    assert runs_of(backend, 42) == 1
    conflict = client.post("/v1/jobs", json={"prompt": "other", "seed": 42}, headers=headers)
    assert conflict.status_code == 409 and "Idempotency-Key" in conflict.json()["error"]
    # The same key from another caller is another caller's key.
    other = client.post("/v1/jobs", json={"prompt": "once", "seed": 42}, headers={**headers, "X-Test-Caller": "bob"})
    assert other.status_code == 202 and other.json()["id"] != first.json()["id"]


def test_a_client_sees_only_its_own_jobs(server):
    live, _, client = server
    alice = {"X-Test-Caller": "alice"}
    job = client.post("/v1/jobs", json={"prompt": "private", "seed": 7}, headers=alice).json()
    assert live.wait_for(client, job["id"], **alice)["state"] == "succeeded"
    for caller in ({"X-Test-Caller": "mallory"}, {}):  # another caller, or anonymous
        response = client.get(f"/v1/jobs/{job['id']}", headers=caller)
        assert response.status_code == 404 and response.json() == {"error": "no such job"}


def test_a_job_that_keeps_failing_is_failed_with_a_readable_error_and_its_message_deleted(server):
    live, _, client = server
    job = client.post("/v1/jobs", json={"prompt": "explode", "seed": 9}).json()
    status = live.wait_for(client, job["id"])
    assert status["state"] == "failed"
    assert status["attempts"] == MAX_RECEIVES
    assert "generation failed (error id " in status["error"]
    assert f"gave up after {MAX_RECEIVES} attempts" in status["error"]
    assert status["image_url"] is None
    queue = LocalQueue(live.jobs_dir / "queue.sqlite3", live.settings.jobs_queue_max_receives)
    assert queue.receive(1, 1.5, 30) == [] and queue.dead_letters(10) == []  # settled: nothing left
    notices = [json.loads(line) for line in (live.jobs_dir / "notifications.jsonl").read_text().splitlines()]
    assert [n["state"] for n in notices if n["job_id"] == job["id"]] == ["failed"]
