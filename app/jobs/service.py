"""Submitting jobs and reading them back, scoped to the caller that submitted them."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from app.jobs.model import (
    JobRecord,
    JobState,
    idempotency_token,
    new_job_id,
    request_fingerprint,
)
from app.jobs.ports import IdempotencyConflict, JobQueue, JobStore
from app.jobs.signing import UrlSigner
from app.params import resolve_params
from app.service import GenerationService
from app.settings import Settings

log = logging.getLogger(__name__)


class IdempotencyKeyReused(Exception):
    """The idempotency key names a job with a different request body: answer 409."""


class QueueUnavailable(Exception):
    """The job was recorded but could not be queued: answer 503 (the record says `failed`)."""


@dataclass(frozen=True)
class Submission:
    """The job a submission created, or found by its idempotency key (`replayed`)."""

    record: JobRecord
    replayed: bool


class JobService:
    """The API side of jobs: validate and enqueue, look up, link to the image."""

    def __init__(
        self,
        settings: Settings,
        generation: GenerationService,
        queue: JobQueue,
        store: JobStore,
        signer: UrlSigner | None = None,
    ):
        self.settings = settings
        self.generation = generation
        self.queue = queue
        self.store = store
        self.signer = signer

    async def submit(self, owner: str, body: dict[str, Any], idempotency_key: str | None) -> Submission:
        """Check the body as /v1/generate would (UnsupportedRequest), record the job, then queue it.

        The seed is fixed here, so every attempt of a job draws the same image.
        """
        params = resolve_params(self.generation, **body)
        fingerprint = request_fingerprint(body)
        now = time.time()
        record = JobRecord(
            id=new_job_id(),
            owner=owner,
            state=JobState.QUEUED,
            request={**body, "seed": params.seed},
            fingerprint=fingerprint,
            max_attempts=self.settings.jobs_max_receives,
            created_at=now,
            updated_at=now,
        )
        token = idempotency_token(owner, idempotency_key) if idempotency_key is not None else None
        try:
            await asyncio.to_thread(self.store.create, record, token)
        except IdempotencyConflict as conflict:
            existing = await self._wait_for_record(conflict.job_id)
            if existing is None or existing.owner != owner or existing.fingerprint != fingerprint:
                raise IdempotencyKeyReused from None
            return Submission(existing, replayed=True)
        try:
            await asyncio.to_thread(self.queue.send, record.id)
        except Exception as exc:
            log.exception("queueing job %s failed", record.id)
            failed = record.touch(
                state=JobState.FAILED, error="the job could not be queued; submit it again (with a new Idempotency-Key)"
            )
            await asyncio.to_thread(self.store.put, failed)
            raise QueueUnavailable from exc
        log.info("job queued", extra={"job_id": record.id})
        return Submission(record, replayed=False)

    async def _wait_for_record(self, job_id: str) -> JobRecord | None:
        """The record an idempotency key points at; a concurrent submitter may still be writing it."""
        for _ in range(20):
            record = await asyncio.to_thread(self.store.get, job_id)
            if record is not None:
                return record
            await asyncio.sleep(0.05)
        return None

    async def get(self, owner: str, job_id: str) -> JobRecord | None:
        """The caller's job, or None: another caller's job reads as absent, not forbidden."""
        record = await asyncio.to_thread(self.store.get, job_id)
        if record is None or record.owner != owner:
            return None
        return record

    async def image_link(self, record: JobRecord) -> tuple[str | None, int]:
        """(store URL or None if the service serves it, its lifetime in seconds)."""
        ttl = self.settings.jobs_url_ttl_s
        return await asyncio.to_thread(self.store.image_url, record.id, ttl), ttl
