"""SIGTERM through `python -m app` with a job running: the job is handed back, not lost, and the next
process (another pod) completes it. Local backend, built-in model, the real HTTP stack."""

from __future__ import annotations

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


@contextmanager
def service(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = {
        "MODEL_CACHE_DIR": str(tmp_path / "models"),
        "UI": "false",
        "JOBS": "local",
        "JOBS_DIR": str(tmp_path / "jobs"),
        "JOBS_POLL_S": "1",
        "SHUTDOWN_GRACE_S": "0",  # hand back at once: the outcome must not depend on CPU speed
        "REQUEST_TIMEOUT_S": "600",
    }
    # Logs go to a file: a pipe nobody reads fills up and blocks the server mid-test.
    log_path = tmp_path / f"service-{time.monotonic_ns()}.log"
    with log_path.open("w") as log, run_app(env, output=log, ready_timeout_s=180, log=log_path) as running:
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


def test_a_job_held_at_sigterm_is_handed_back_and_the_next_pod_completes_it(tmp_path):
    with service(tmp_path) as (process, url):
        # Many steps: it is still running when SIGTERM comes.
        job = httpx.post(
            f"{url}/v1/jobs", json={"prompt": "slow", "steps": 100, "width": 128, "height": 128, "seed": 8}, timeout=60
        ).json()
        wait_state(url, job["id"], {"running"}, 60)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
    handed_back = LocalStore(tmp_path / "jobs").get(job["id"])
    assert handed_back is not None and handed_back.state is JobState.QUEUED and handed_back.attempts == 1

    with service(tmp_path) as (_, url):  # another pod, same queue and store
        done = wait_state(url, job["id"], {"succeeded", "failed"}, 300)
    assert done["state"] == "succeeded" and done["attempts"] == 2 and done["seed"] == 8
