"""The job record: what was asked, who asked, where it stands, and how the client sees it."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, Field

JOB_ID_PATTERN: Final = re.compile(r"[0-9a-f]{32}")
# What a client may send as Idempotency-Key: printable ASCII, as the IETF draft suggests.
IDEMPOTENCY_KEY_PATTERN: Final = re.compile(r"^[\x21-\x7e]{1,255}$")


class JobState(StrEnum):
    """Where a job stands."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TERMINAL_STATES: Final = frozenset({JobState.SUCCEEDED, JobState.FAILED})


def new_job_id() -> str:
    """A random, unguessable job id (32 hex characters)."""
    return uuid.uuid4().hex


def request_fingerprint(request: dict[str, Any]) -> str:
    """A stable hash of a request body, to tell a retried submission from a different one."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def idempotency_token(owner: str, key: str) -> str:
    """The store key of a client's idempotency key: scoped to its owner, and no client text in paths."""
    return hashlib.sha256(f"{owner}\x00{key}".encode()).hexdigest()


class JobRecord(BaseModel):
    """A job as stored (a JSON document per job)."""

    id: str
    owner: str
    state: JobState
    request: dict[str, Any] = Field(description="the /v1/generate body, with the seed fixed at submission")
    fingerprint: str
    max_attempts: int
    created_at: float
    updated_at: float
    attempts: int = Field(
        0, description="attempts started; a job handed back at shutdown gets its attempt back (app/jobs/worker.py)"
    )
    error: str | None = None
    lease_until: float | None = Field(None, description="while running: when the worker's hold on it lapses")
    backend: str | None = None
    finished_at: float | None = None
    notified: bool = Field(False, description="the finished-job notice was published")

    def touch(self, **changes: Any) -> JobRecord:
        """A copy with `changes` applied and `updated_at` set to now."""
        return self.model_copy(update={**changes, "updated_at": time.time()})

    def visible_state(self, now: float | None = None) -> tuple[JobState, str | None]:
        """The state and error a client is shown.

        A worker that dies mid-job cannot record it: its lease lapses and the queue hands the job out
        again, and the next worker records the attempt as failed. So until then a lapsed lease reads
        as `queued` while attempts remain and as `failed` after the last one.
        """
        if self.worker_stopped(now):
            if self.attempts >= self.max_attempts:
                return JobState.FAILED, self.final_error(self.stopped_error())
            return JobState.QUEUED, self.stopped_error()
        return self.state, self.error

    def worker_stopped(self, now: float | None = None) -> bool:
        """True if the job is `running` but its worker's lease lapsed: the worker died mid-attempt."""
        now = time.time() if now is None else now
        return self.state is JobState.RUNNING and (self.lease_until is None or self.lease_until < now)

    def stopped_error(self) -> str:
        """The error of an attempt whose worker died (killed, out of memory, node lost)."""
        return f"the worker stopped during attempt {self.attempts} of {self.max_attempts}"

    def final_error(self, error: str) -> str:
        """The error of the job's last attempt, as the job's final error."""
        return f"{error}; gave up after {self.attempts} attempts"
