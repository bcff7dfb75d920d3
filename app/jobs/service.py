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
from app.params import resolve_body
from app.service import GenerationService
from app.settings import Settings
from common.logs import log_failure

log = logging.getLogger(__name__)

# How long a retry waits for a concurrent submission with the same key to record and queue its job.
REPLAY_POLLS = 20
REPLAY_POLL_S = 0.05


class IdempotencyKeyReused(Exception):
    """The idempotency key names a job with a different request body: answer 409."""


class QueueUnavailable(Exception):
    """The job was recorded but could not be queued: answer 503.

    With an Idempotency-Key a retry with the same key queues it; without one the record says `failed`.
    """


class SubmissionInProgress(Exception):
    """An earlier submission with this Idempotency-Key is still being recorded or queued: answer 503."""


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

        The seed is fixed here, so every attempt of a job draws the same image. The store raises
        StoreFull or StoreUnavailable when the record cannot be written.
        """
        params = await asyncio.to_thread(resolve_body, self.generation, body)
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
            record = await asyncio.to_thread(self.store.create, record, token)
        except IdempotencyConflict:
            assert token is not None
            return await self._replay(token, owner, fingerprint)
        await self._enqueue(record, token)
        log.info("job queued", extra={"job_id": record.id})
        return Submission(record, replayed=False)

    async def _enqueue(self, record: JobRecord, token: str | None) -> None:
        """Send the job's message, then mark the claim (a replay finds an unmarked, stale claim's job unqueued)."""
        try:
            await asyncio.to_thread(self.queue.send, record.id)
        except Exception as exc:
            log.exception("queueing job %s failed", record.id)
            if token is None:  # nobody can ask for this job again
                failed = record.touch(state=JobState.FAILED, error="the job could not be queued; submit it again")
                await asyncio.to_thread(self.store.put, failed)
            raise QueueUnavailable from exc
        if token is not None:
            try:
                await asyncio.to_thread(self.store.mark_enqueued, token, record.id)
            except Exception as exc:  # the job is queued; a later replay may send a duplicate, which workers settle
                log_failure(log, f"marking job {record.id} queued on its claim failed", exc)

    async def _replay(self, token: str, owner: str, fingerprint: str) -> Submission:
        """The job an earlier submission with this key made; queued now if that submission died before.

        A concurrent submitter may still be writing or queueing it: wait a moment for that.
        """
        for _ in range(REPLAY_POLLS):
            claim = await asyncio.to_thread(self.store.claim, token)
            record = await asyncio.to_thread(self.store.get, claim.job_id) if claim is not None else None
            if claim is not None and record is not None:
                if record.owner != owner or record.fingerprint != fingerprint:
                    raise IdempotencyKeyReused
                # A job that ran or runs was queued, whatever its claim says (claims written before
                # the queued mark existed have none).
                if claim.enqueued or record.state is not JobState.QUEUED or record.attempts > 0:
                    return Submission(record, replayed=True)
                if claim.age_s >= self.store.claim_stale_s:
                    log.warning("queueing the job of a submission that died first", extra={"job_id": record.id})
                    await self._enqueue(record, token)
                    return Submission(record, replayed=True)
            await asyncio.sleep(REPLAY_POLL_S)
        raise SubmissionInProgress

    async def get(self, owner: str, job_id: str) -> JobRecord | None:
        """The caller's job, or None: another caller's job reads as absent, not forbidden."""
        record = await asyncio.to_thread(self.store.get, job_id)
        if record is None or record.owner != owner:
            return None
        return record

    async def image_link(self, image_id: str) -> tuple[str | None, int]:
        """(store URL of a stored image or None if the service serves it, its lifetime in seconds)."""
        ttl = self.settings.jobs_url_ttl_s
        return await asyncio.to_thread(self.store.image_url, image_id, ttl), ttl

    async def keep_image(self, png: bytes) -> str:
        """Store a PNG that belongs to no job (the Images API's `url` answers) under a new unguessable id;
        the store's expiry applies to it as to a job's image. The store's own errors propagate."""
        image_id = new_job_id()
        await asyncio.to_thread(self.store.put_image, image_id, png)
        return image_id
