"""Accepted jobs are never lost, through `python -m app` killed with SIGKILL and SIGTERM (local backend,
built-in model, the real HTTP stack).

Where a kill must land between two writes, the test leaves on disk what such a kill leaves (written
with the store's, queue's and notifier's own code) and starts the real process on it. The crash test
at the end kills the process at random points of bursts of keyed submissions, again and again.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.schemas import make_generate_request
from app.jobs.local import LocalQueue, LocalStore
from app.jobs.model import JobRecord, JobState, idempotency_token, new_job_id, request_fingerprint
from app.jobs.notice import finished_notice
from app.settings import load_settings
from tests.support.app_process import run_app

FINISHED = {"succeeded", "failed"}
OWNER = "anonymous"  # the caller id with AUTH=off


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One built-in model for every process of this module: each start then takes seconds."""
    return tmp_path_factory.mktemp("models")


@contextmanager
def service(jobs_dir: Path, model_cache: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = {
        "MODEL_CACHE_DIR": str(model_cache),
        "UI": "false",
        "JOBS": "local",
        "JOBS_DIR": str(jobs_dir),
        "JOBS_POLL_S": "0.5",
        "JOBS_VISIBILITY_S": "10",  # the least: a killed worker's job comes back after 10 s
        "DEFAULT_WIDTH": "64",  # the warm-up and the jobs at the smallest size: each start takes seconds
        "DEFAULT_HEIGHT": "64",
        **env,
    }
    # Logs go to a file: a pipe nobody reads fills up and blocks the server mid-test.
    log_path = jobs_dir.parent / f"service-{time.monotonic_ns()}.log"
    with run_app(env, ready_timeout_s=180, log=log_path) as running:
        yield running


def status(url: str, job_id: str) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/jobs/{job_id}", timeout=60).json()


def wait_state(url: str, job_id: str, states: set[str], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = status(url, job_id)
        if found["state"] in states:
            return found
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {states}: {found}")


def wait_all(url: str, job_ids: set[str], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Every job's status once all are finished; fails naming the unfinished ones after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    finals: dict[str, dict[str, Any]] = {}
    while True:
        for job_id in job_ids - set(finals):
            found = status(url, job_id)
            if found["state"] in FINISHED:
                finals[job_id] = found
        unfinished = job_ids - set(finals)
        if not unfinished:
            return finals
        assert time.monotonic() < deadline, f"{len(unfinished)} accepted jobs never finished: {sorted(unfinished)}"
        time.sleep(0.2)


def notices(jobs_dir: Path) -> list[dict[str, Any]]:
    path = jobs_dir / "notifications.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_notices(jobs_dir: Path, job_ids: set[str], timeout_s: float) -> list[dict[str, Any]]:
    """The notices once every job in `job_ids` has one (a record reads finished a moment before)."""
    deadline = time.monotonic() + timeout_s
    while not job_ids <= {n["job_id"] for n in notices(jobs_dir)} and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # room for a second notice, if there were one
    return notices(jobs_dir)


def recorded(job_id: str, body: dict[str, Any], **changes: Any) -> JobRecord:
    """A record as POST /v1/jobs writes it for `body` (its seed fixed), the body read as the route reads it."""
    request = make_generate_request(load_settings())(**body).model_dump()
    now = time.time()
    return JobRecord(
        id=job_id,
        owner=OWNER,
        state=JobState.QUEUED,
        request=request,
        fingerprint=request_fingerprint(request),
        max_attempts=3,
        created_at=now,
        updated_at=now,
    ).model_copy(update=changes)


def test_a_job_killed_during_its_last_attempt_is_failed_on_disk_and_announced_once(tmp_path, model_cache):
    jobs_dir = tmp_path / "jobs"
    slow = {"prompt": "slow", "steps": 100, "width": 128, "height": 128, "seed": 4}  # running at the kill
    with service(jobs_dir, model_cache, JOBS_MAX_RECEIVES="1") as (process, url):
        job_id = httpx.post(f"{url}/v1/jobs", json=slow, timeout=60).json()["id"]
        wait_state(url, job_id, {"running"}, 60)
        process.kill()
        process.wait(timeout=30)
    with service(jobs_dir, model_cache, JOBS_MAX_RECEIVES="1") as (_, url):
        wait_notices(jobs_dir, {job_id}, 60)  # once its lease lapses, the next delivery records the death
        shown = status(url, job_id)
    on_disk = LocalStore(jobs_dir).get(job_id)
    assert on_disk is not None and on_disk.state is JobState.FAILED and on_disk.notified
    assert on_disk.error == "the worker stopped during attempt 1 of 1; gave up after 1 attempts"
    assert shown["state"] == "failed" and shown["error"] == on_disk.error
    assert [(n["job_id"], n["state"]) for n in notices(jobs_dir)] == [(job_id, "failed")]


def test_a_job_whose_process_was_killed_after_its_notice_is_not_announced_again(tmp_path, model_cache):
    """SIGKILL after the notice was written, before the record said so and the message was deleted."""
    jobs_dir = tmp_path / "jobs"
    store = LocalStore(jobs_dir)
    done = recorded(
        new_job_id(), {"prompt": "done", "seed": 5, "width": 64, "height": 64}, state=JobState.SUCCEEDED, attempts=1
    )
    done = done.model_copy(update={"finished_at": time.time()})
    store.put(done)
    LocalQueue(jobs_dir / "queue.sqlite3", 100).send(done.id)
    (jobs_dir / "notices").mkdir()
    (jobs_dir / "notices" / done.id).write_text("pending")  # the outbox entry the notifier writes first
    (jobs_dir / "notifications.jsonl").write_text(json.dumps(finished_notice(done)) + "\n")

    with service(jobs_dir, model_cache) as (_, url):
        deadline = time.monotonic() + 30
        while not LocalStore(jobs_dir).get(done.id).notified:  # the message was delivered and settled
            assert time.monotonic() < deadline, "the job's message was never settled"
            time.sleep(0.1)
        assert status(url, done.id)["state"] == "succeeded"
    assert [n["job_id"] for n in wait_notices(jobs_dir, {done.id}, 5)] == [done.id]


def test_a_retry_queues_the_job_of_a_submission_killed_before_it_was_queued(tmp_path, model_cache):
    """SIGKILL after the claim and the record were written, before the message was sent."""
    jobs_dir = tmp_path / "jobs"
    key, body = "order-7", {"prompt": "never queued", "seed": 6, "width": 64, "height": 64}
    token = idempotency_token(OWNER, key)
    stranded = recorded(new_job_id(), body)
    LocalStore(jobs_dir).create(stranded, token)
    LocalQueue(jobs_dir / "queue.sqlite3", 100)  # the queue exists, without the job's message
    claim = jobs_dir / "idempotency" / token
    os.utime(claim, (time.time() - 60, time.time() - 60))  # the killed submission was a while ago

    with service(jobs_dir, model_cache) as (_, url):
        retry = httpx.post(f"{url}/v1/jobs", json=body, headers={"Idempotency-Key": key}, timeout=60)
        assert retry.status_code == 202 and retry.json()["id"] == stranded.id
        assert retry.headers["idempotent-replayed"] == "true"
        done = wait_state(url, stranded.id, FINISHED, 30)
        announced = wait_notices(jobs_dir, {stranded.id}, 5)
    assert done["state"] == "succeeded" and done["attempts"] == 1
    assert [n["job_id"] for n in announced] == [stranded.id]


def test_a_retry_adopts_the_job_of_a_submission_killed_between_its_claim_and_its_record(tmp_path, model_cache):
    jobs_dir = tmp_path / "jobs"
    key, body = "order-8", {"prompt": "claimed only", "seed": 7, "width": 64, "height": 64}
    token = idempotency_token(OWNER, key)
    orphan_id = new_job_id()
    (jobs_dir / "idempotency").mkdir(parents=True)
    claim = jobs_dir / "idempotency" / token
    claim.write_text(orphan_id)  # what the store's claim holds before the record is written
    os.utime(claim, (time.time() - 60, time.time() - 60))

    with service(jobs_dir, model_cache) as (_, url):
        retry = httpx.post(f"{url}/v1/jobs", json=body, headers={"Idempotency-Key": key}, timeout=60)
        assert retry.status_code == 202, retry.text
        assert retry.json()["id"] == orphan_id
        again = httpx.post(f"{url}/v1/jobs", json=body, headers={"Idempotency-Key": key}, timeout=60)
        assert again.status_code == 202 and again.json()["id"] == orphan_id
        assert wait_state(url, orphan_id, FINISHED, 30)["state"] == "succeeded"


# The crash test: rounds of keyed bursts, each cut by SIGKILL or SIGTERM at a random moment.
ROUNDS = (signal.SIGKILL, signal.SIGTERM, signal.SIGKILL, signal.SIGTERM)
BURST = 12  # new keys per round
CONCURRENT = 8


def crash_body(key: str) -> dict[str, Any]:
    return {"prompt": f"crash {key}", "seed": int(key.rsplit("-", 1)[1]), "width": 64, "height": 64}


class Client:
    """Submits keys as a careful client does: retries every key without a 202, with the same key and body."""

    def __init__(self) -> None:
        self.accepted: dict[str, str] = {}
        self.statuses: Counter[int | str] = Counter()
        self.two_jobs: list[str] = []  # keys that named two different jobs (checked on the test's thread)
        self._lock = threading.Lock()

    def pending(self, keys: list[str]) -> list[str]:
        return [key for key in keys if key not in self.accepted]

    async def submit(self, url: str, keys: list[str]) -> None:
        limit = asyncio.Semaphore(CONCURRENT)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:

            async def one(key: str) -> None:
                async with limit:
                    try:
                        response = await client.post("/v1/jobs", json=crash_body(key), headers={"Idempotency-Key": key})
                    except httpx.TransportError:
                        return  # the process died under it: retried in a later round
                with self._lock:
                    # A request still inside the app when the shutdown grace ends is cancelled by
                    # uvicorn, which answers its own plain-text 500: the process died under it.
                    cut = response.status_code == 500 and response.text == "Internal Server Error"
                    self.statuses["cut" if cut else response.status_code] += 1
                    if response.status_code == 202:
                        job_id = response.json()["id"]
                        if self.accepted.setdefault(key, job_id) != job_id:
                            self.two_jobs.append(key)

            await asyncio.gather(*(one(key) for key in keys))


def test_every_accepted_job_ends_exactly_once_while_the_process_is_killed_again_and_again(tmp_path, model_cache):
    jobs_dir = tmp_path / "jobs"
    rng = random.Random(16)  # noqa: S311 - kill timings, not secrets
    client = Client()
    keys: list[str] = []
    env = {"JOBS_MAX_RECEIVES": "2", "SHUTDOWN_GRACE_S": "2"}
    for round_number, kill in enumerate(ROUNDS):
        keys += [f"crash-{round_number * BURST + i}" for i in range(BURST)]
        # New keys, keys still without a 202, and a few accepted ones (each must name its job again).
        again = rng.sample(sorted(client.accepted), min(4, len(client.accepted)))
        batch = client.pending(keys) + again
        with service(jobs_dir, model_cache, **env) as (process, url), ThreadPoolExecutor(1) as burst:
            submitted = burst.submit(asyncio.run, client.submit(url, batch))
            time.sleep(rng.uniform(0.05, 0.6))
            process.send_signal(kill)
            process.wait(timeout=60)
            submitted.result(timeout=60)  # re-raises what went wrong on the burst's thread
    with service(jobs_dir, model_cache, **env) as (_, url):
        deadline = time.monotonic() + 30
        while client.pending(keys):
            assert time.monotonic() < deadline, f"never accepted: {client.pending(keys)}"
            asyncio.run(client.submit(url, client.pending(keys)))
            time.sleep(0.5 if client.pending(keys) else 0)
        finals = wait_all(url, set(client.accepted.values()), 60)
        announced = wait_notices(jobs_dir, set(finals), 20)

    assert set(client.statuses) <= {202, 503, "cut"}, client.statuses  # never a 409, 500 or 507 for a retry
    assert client.two_jobs == []
    assert len(set(client.accepted.values())) == len(keys)  # one job per key
    for final in finals.values():
        assert final["state"] == "succeeded" or final["error"], final
    counts = Counter(n["job_id"] for n in announced)
    assert counts == Counter(set(finals)), "every accepted job announced exactly once, and nothing else"
    assert all(n["state"] == finals[n["job_id"]]["state"] for n in announced)
    # Nothing half-made stays behind: every record on disk is an accepted job's.
    on_disk = {path.stem for path in (jobs_dir / "records").glob("*.json")}
    assert on_disk == set(finals)
