"""The embedded backend for `make run`: a SQLite queue and a record/image store on disk.

It keeps the AWS semantics that matter to a client and a worker: at-least-once delivery with a
visibility timeout, a dead-letter table after `max_receives` receives, records that survive a
restart, and one notification line per finished job (in `notifications.jsonl`, the local stand-in
for the SNS topic).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from app.jobs.model import JobRecord
from app.jobs.notice import finished_notice
from app.jobs.ports import Delivery, IdempotencyConflict

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    visible_at REAL NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT
);
CREATE TABLE IF NOT EXISTS dead_letters (job_id TEXT NOT NULL, moved_at REAL NOT NULL);
"""


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class LocalQueue:
    """A durable queue in one SQLite file; safe across threads and processes."""

    def __init__(self, path: Path, max_receives: int):
        self.path = path
        self.max_receives = max_receives
        path.parent.mkdir(parents=True, exist_ok=True)
        self._arrived = threading.Condition()  # wakes in-process receivers at once on send
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def send(self, job_id: str) -> None:
        """Enqueue a job, visible at once."""
        with self._connect() as db:
            db.execute("INSERT INTO messages (job_id, visible_at) VALUES (?, ?)", (job_id, time.time()))
        with self._arrived:
            self._arrived.notify_all()

    def _take(self, max_messages: int, visibility_s: int) -> list[Delivery]:
        now = time.time()
        taken: list[Delivery] = []
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # one receiver at a time takes messages
            rows = db.execute(
                "SELECT id, job_id, receive_count FROM messages WHERE visible_at <= ? ORDER BY id",
                (now,),
            ).fetchall()
            for row_id, job_id, count in rows:
                if len(taken) >= max_messages:
                    break
                if count >= self.max_receives:  # as SQS: moved to the dead-letter queue on the next receive
                    db.execute("DELETE FROM messages WHERE id = ?", (row_id,))
                    db.execute("INSERT INTO dead_letters VALUES (?, ?)", (job_id, now))
                    continue
                receipt = f"{row_id}:{uuid.uuid4().hex}"
                db.execute(
                    "UPDATE messages SET receive_count = ?, visible_at = ?, receipt = ? WHERE id = ?",
                    (count + 1, now + visibility_s, receipt, row_id),
                )
                taken.append(Delivery(job_id, receipt, count + 1))
            db.execute("COMMIT")
        return taken

    def receive(self, max_messages: int, wait_s: float, visibility_s: int) -> list[Delivery]:
        """Up to `max_messages` visible messages, waiting up to `wait_s` for one to arrive."""
        deadline = time.monotonic() + wait_s
        while True:
            taken = self._take(max_messages, visibility_s)
            left = deadline - time.monotonic()
            if taken or left <= 0:
                return taken
            with self._arrived:
                # Another process may send too: look again at least every half second.
                self._arrived.wait(min(left, 0.5))

    def extend(self, delivery: Delivery, visibility_s: int) -> None:
        """Hide the message for `visibility_s` more (0: visible now), if the receipt is still current."""
        row_id = int(delivery.receipt.split(":", 1)[0])
        with self._connect() as db:
            db.execute(
                "UPDATE messages SET visible_at = ? WHERE id = ? AND receipt = ?",
                (time.time() + visibility_s, row_id, delivery.receipt),
            )
        if visibility_s == 0:
            with self._arrived:
                self._arrived.notify_all()

    def delete(self, delivery: Delivery) -> None:
        """Remove the message (only with its current receipt, as SQS)."""
        row_id = int(delivery.receipt.split(":", 1)[0])
        with self._connect() as db:
            db.execute("DELETE FROM messages WHERE id = ? AND receipt = ?", (row_id, delivery.receipt))

    def dead_letters(self) -> list[str]:
        """Job ids in the dead-letter table, oldest first."""
        with self._connect() as db:
            return [row[0] for row in db.execute("SELECT job_id FROM dead_letters ORDER BY moved_at")]


class LocalStore:
    """Records as JSON files, images as PNG files, idempotency keys as link-once files."""

    def __init__(self, root: Path):
        self.root = root
        for sub in ("records", "images", "idempotency"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def _record_path(self, job_id: str) -> Path:
        return self.root / "records" / f"{job_id}.json"

    def _image_path(self, job_id: str) -> Path:
        return self.root / "images" / f"{job_id}.png"

    def create(self, record: JobRecord, idempotency_token: str | None) -> None:
        """Claim the idempotency token (atomically: a hard link fails if it exists), then write the record."""
        if idempotency_token is not None:
            claim = self.root / "idempotency" / idempotency_token
            tmp = claim.with_name(f".{claim.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_text(record.id)
            try:
                os.link(tmp, claim)
            except FileExistsError:
                raise IdempotencyConflict(claim.read_text().strip()) from None
            finally:
                tmp.unlink()
        self.put(record)

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or None if there is none."""
        try:
            return JobRecord.model_validate_json(self._record_path(job_id).read_bytes())
        except FileNotFoundError:
            return None

    def put(self, record: JobRecord) -> None:
        """Replace the record atomically."""
        _write_atomically(self._record_path(record.id), record.model_dump_json().encode())

    def put_image(self, job_id: str, png: bytes) -> None:
        """Write the PNG atomically."""
        _write_atomically(self._image_path(job_id), png)

    def image_url(self, job_id: str, ttl_s: int) -> str | None:
        """None: the service serves local images itself (signed links, see app/jobs/signing.py)."""
        return None

    def read_image(self, job_id: str) -> bytes | None:
        """The PNG, or None."""
        try:
            return self._image_path(job_id).read_bytes()
        except FileNotFoundError:
            return None


class LocalNotifier:
    """One JSON line per finished job in `notifications.jsonl`, and a log line."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def job_finished(self, record: JobRecord) -> None:
        """Append the job's announcement."""
        line = json.dumps(finished_notice(record)) + "\n"
        with self._lock, self.path.open("a") as out:
            out.write(line)
        log.info("job finished", extra={"job_id": record.id, "state": record.state.value})
