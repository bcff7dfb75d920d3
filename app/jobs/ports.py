"""What the jobs service needs from a backend: a queue, a store and a notifier.

Every method blocks (disk or network I/O); the service calls them off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.jobs.model import JobRecord


class IdempotencyConflict(Exception):
    """The idempotency key already names a job: the existing job's id is attached."""

    def __init__(self, job_id: str):
        super().__init__(job_id)
        self.job_id = job_id


class StoreFull(Exception):
    """The store has no space left for a new record (the local disk is full): answer 507."""


class StoreUnavailable(Exception):
    """The store could not write a new record: answer 503."""


@dataclass(frozen=True)
class Claim:
    """What an idempotency key's claim says: its job, whether that job's message was sent, its age."""

    job_id: str
    enqueued: bool
    age_s: float


@dataclass(frozen=True)
class Delivery:
    """One received job message: which job, the handle to settle it, and how often it was received."""

    job_id: str
    receipt: str
    receive_count: int


class JobQueue(Protocol):
    """An at-least-once queue with visibility timeouts and a dead-letter queue."""

    def send(self, job_id: str) -> None:
        """Enqueue a job."""
        ...

    def receive(self, max_messages: int, wait_s: float, visibility_s: int) -> list[Delivery]:
        """Up to `max_messages` deliveries, hidden from other consumers for `visibility_s`."""
        ...

    def extend(self, delivery: Delivery, visibility_s: int) -> None:
        """Keep a delivery hidden for another `visibility_s` from now (0: hand it out again now)."""
        ...

    def delete(self, delivery: Delivery) -> None:
        """Remove a settled job's message for good."""
        ...

    def dead_letters(self, max_messages: int) -> list[Delivery]:
        """Up to `max_messages` messages the queue gave up on (its dead-letter queue), without waiting."""
        ...

    def delete_dead_letter(self, delivery: Delivery) -> None:
        """Remove a dead letter whose job has been settled."""
        ...


class JobStore(Protocol):
    """Job records and their images."""

    claim_stale_s: float
    """A claim this old whose job is not recorded, or not queued, belongs to a submission that died."""

    def create(self, record: JobRecord, idempotency_token: str | None) -> JobRecord:
        """Claim the token, then store the new record; the record stored.

        IdempotencyConflict if the token names another job. A stale claim whose record was never
        written (its writer was killed) is adopted: the record is stored under the claim's job id.
        If the record cannot be written, StoreFull or StoreUnavailable (and the claim is released
        where the store can).
        """
        ...

    def claim(self, idempotency_token: str) -> Claim | None:
        """The token's claim, or None."""
        ...

    def mark_enqueued(self, idempotency_token: str, job_id: str) -> None:
        """Note on the claim that its job's message was sent."""
        ...

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or None."""
        ...

    def put(self, record: JobRecord) -> None:
        """Overwrite a record."""
        ...

    def put_image(self, job_id: str, png: bytes) -> None:
        """Store a job's PNG."""
        ...

    def image_url(self, job_id: str, ttl_s: int) -> str | None:
        """A URL that fetches the PNG without credentials for `ttl_s`, or None if the service serves it."""
        ...

    def read_image(self, job_id: str) -> bytes | None:
        """The PNG bytes (for a store whose images the service serves itself)."""
        ...


class Notifier(Protocol):
    """Announces finished jobs."""

    def job_finished(self, record: JobRecord) -> None:
        """Publish the message of a job that reached `succeeded` or `failed`.

        Called again for the same job after a crash (until the record says `notified`): a notifier
        that can tell whether its last publication landed publishes only once.
        """
        ...
