"""SIGTERM through `python -m app` with a job running: the job is handed back, not lost, and the next
process (another pod) completes it. A hand-back is not an attempt: a job handed back more often than it
has attempts still runs; and a job the queue itself gives up on is failed and announced, not left
`queued`. Local backend, built-in model, the real HTTP stack."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.jobs.local import LocalStore
from app.jobs.model import JobState
from tests.support.app_process import run_app

SLOW_JOB = {"prompt": "slow", "steps": 100, "width": 128, "height": 128, "seed": 8}  # still running at SIGTERM


@contextmanager
def service(tmp_path: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = {
        "MODEL_CACHE_DIR": str(tmp_path / "models"),
        "UI": "false",
        "JOBS": "local",
        "JOBS_DIR": str(tmp_path / "jobs"),
        "JOBS_POLL_S": "1",
        "SHUTDOWN_GRACE_S": "0",  # hand back at once: the outcome must not depend on CPU speed
        "REQUEST_TIMEOUT_S": "600",
        **env,
    }
    # Logs go to a file: a pipe nobody reads fills up and blocks the server mid-test.
    log_path = tmp_path / f"service-{time.monotonic_ns()}.log"
    with run_app(env, ready_timeout_s=180, log=log_path) as running:
        yield running


def wait_state(url: str, job_id: str, states: set[str], timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # A generous timeout: the pipeline keeps both cores of a small test machine busy.
        status = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=60).json()
        if status["state"] in states:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {states}")


def notices(tmp_path: Path, job_id: str) -> list[str]:
    lines = (tmp_path / "jobs" / "notifications.jsonl").read_text().splitlines()
    return [notice["state"] for notice in map(json.loads, lines) if notice["job_id"] == job_id]


def submit_and_hand_back(tmp_path: Path, **env: str) -> str:
    """Submit the slow job, SIGTERM the process while it runs; the job's id."""
    with service(tmp_path, **env) as (process, url):
        job = httpx.post(f"{url}/v1/jobs", json=SLOW_JOB, timeout=60).json()
        wait_state(url, job["id"], {"running"}, 60)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
    return job["id"]


def test_a_job_held_at_sigterm_is_handed_back_with_its_attempt_and_the_next_pod_completes_it(tmp_path):
    # One attempt only: before, the hand-back used it up and the job was dead-lettered, `queued` forever.
    job_id = submit_and_hand_back(tmp_path, JOBS_MAX_RECEIVES="1")
    handed_back = LocalStore(tmp_path / "jobs").get(job_id)
    assert handed_back is not None and handed_back.state is JobState.QUEUED and handed_back.attempts == 0

    with service(tmp_path, JOBS_MAX_RECEIVES="1") as (_, url):  # another pod, same queue and store
        done = wait_state(url, job_id, {"succeeded", "failed"}, 300)  # 100 steps on a loaded 2-core box
    assert done["state"] == "succeeded" and done["attempts"] == 1 and done["seed"] == 8
    assert notices(tmp_path, job_id) == ["succeeded"]


def test_a_job_the_queue_gives_up_on_is_failed_and_announced(tmp_path):
    limits = {"JOBS_MAX_RECEIVES": "1", "JOBS_QUEUE_MAX_RECEIVES": "1"}  # the queue gives up after one delivery
    job_id = submit_and_hand_back(tmp_path, **limits)
    with service(tmp_path, **limits) as (_, url):
        done = wait_state(url, job_id, {"succeeded", "failed"}, 60)
    assert done["state"] == "failed" and done["attempts"] == 0
    assert "the job queue gave up on it after 1 deliveries (JOBS_QUEUE_MAX_RECEIVES)" in done["error"]
    assert notices(tmp_path, job_id) == ["failed"]
