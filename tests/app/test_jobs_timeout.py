"""Jobs have their own time limit (JOBS_TIMEOUT_S): a job longer than REQUEST_TIMEOUT_S succeeds, and a
job past JOBS_TIMEOUT_S fails with an error that names the setting. Real HTTP stack, local backend."""

from __future__ import annotations

import httpx

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import serve_jobs

SLOW = {"prompt": "slow", "steps": 4, "seed": 3}  # 4 steps of 0.5 s: about 2 s


def test_a_job_longer_than_the_request_timeout_succeeds(tmp_path):
    backend = FakeBackend(delay_s=0.5)
    with (
        serve_jobs(tmp_path, lambda _s: backend, request_timeout_s=1.0, jobs_timeout_s=30.0) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        job = client.post("/v1/jobs", json=SLOW).json()
        status = live.wait_for(client, job["id"], timeout_s=60)
        # An interactive request with the same body still answers 504 after REQUEST_TIMEOUT_S.
        assert client.post("/v1/generate", json=SLOW).status_code == 504
    assert status["state"] == "succeeded", status
    assert status["attempts"] == 1


def test_a_job_past_its_own_limit_fails_with_an_error_naming_it(tmp_path):
    backend = FakeBackend(delay_s=0.5)
    with (
        serve_jobs(tmp_path, lambda _s: backend, jobs_timeout_s=1.0, jobs_max_receives=1) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        job = client.post("/v1/jobs", json=SLOW).json()
        status = live.wait_for(client, job["id"], timeout_s=60)
    assert status["state"] == "failed", status
    assert "no image within JOBS_TIMEOUT_S (1 s)" in status["error"]
