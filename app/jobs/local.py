"""The embedded backend for `make run`: a SQLite queue and a record/image store on disk.

It keeps the AWS semantics that matter to a client and a worker: at-least-once delivery with a
visibility timeout, a dead-letter table after `max_receives` receives, records that survive a
restart, and exactly one notification line per finished job (in `notifications.jsonl`, the local
stand-in for the SNS topic), even when the process is killed while writing it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
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
from app.jobs.ports import Claim, Delivery, IdempotencyConflict, StoreFull, StoreUnavailable

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


# A claim older than this whose record does not exist, or whose job was not queued, belongs to a
# submission that died (writing a record and queueing it take milliseconds): a retry with the same
# key adopts its job id, or queues it.
CLAIM_STALE_S = 5.0
ENQUEUED_MARK = "queued"  # the claim file's second line once the job's message was sent
DEAD_LETTER_RECEIPT = "dead:"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _write_temporary(path: Path, data: bytes) -> Path:
    """`data` in a new file beside `path` (removed again if the write fails, e.g. on a full disk)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_bytes(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _write_atomically(path: Path, data: bytes) -> None:
    os.replace(_write_temporary(path, data), path)


def _create_exclusively(path: Path, data: bytes) -> bool:
    """Write `path` atomically unless it exists (a hard link fails then); True if this call wrote it."""
    tmp = _write_temporary(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink()
    return True


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

    def dead_letters(self, max_messages: int) -> list[Delivery]:
        """Up to `max_messages` entries of the dead-letter table, oldest first (they stay until deleted)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT rowid, job_id FROM dead_letters ORDER BY moved_at LIMIT ?", (max_messages,)
            ).fetchall()
        return [Delivery(job_id, f"{DEAD_LETTER_RECEIPT}{rowid}", self.max_receives) for rowid, job_id in rows]

    def delete_dead_letter(self, delivery: Delivery) -> None:
        """Remove an entry of the dead-letter table."""
        rowid = int(delivery.receipt.removeprefix(DEAD_LETTER_RECEIPT))
        with self._connect() as db:
            db.execute("DELETE FROM dead_letters WHERE rowid = ?", (rowid,))


class LocalStore:
    """Records as JSON files, images as PNG files, idempotency keys as link-once files."""

    claim_stale_s = CLAIM_STALE_S

    def __init__(self, root: Path):
        self.root = root
        for sub in ("records", "images", "idempotency"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def _record_path(self, job_id: str) -> Path:
        return self.root / "records" / f"{job_id}.json"

    def _image_path(self, job_id: str) -> Path:
        return self.root / "images" / f"{job_id}.png"

    def create(self, record: JobRecord, idempotency_token: str | None) -> JobRecord:
        """Claim the idempotency token (atomically: a hard link fails if it exists), then write the record.

        A stale claim without a record is adopted: the record is written under the claim's job id.
        A record that cannot be written releases the claim: StoreFull on a full disk, else StoreUnavailable.
        """
        try:
            if idempotency_token is None:
                self.put(record)
                return record
            claim = self.root / "idempotency" / idempotency_token
            for _ in range(3):  # a claim released between our tries is claimed again
                if _create_exclusively(claim, record.id.encode()):
                    try:
                        self.put(record)
                    except OSError:
                        claim.unlink(missing_ok=True)  # the key stays usable: the next retry claims it afresh
                        raise
                    return record
                with contextlib.suppress(FileNotFoundError):
                    return self._adopt(claim, record)
            raise IdempotencyConflict(record.id)
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise StoreFull("no space left for job records") from exc
            raise StoreUnavailable(f"writing the job record failed ({exc.strerror})") from exc

    def _adopt(self, claim_path: Path, record: JobRecord) -> JobRecord:
        """The claim names another job: adopt its id if that job's writer died before writing its record."""
        claim = _read_claim(claim_path)  # FileNotFoundError: released meanwhile
        if claim.age_s < CLAIM_STALE_S or self._record_path(claim.job_id).exists():
            raise IdempotencyConflict(claim.job_id)
        adopted = record.model_copy(update={"id": claim.job_id})
        if not _create_exclusively(self._record_path(claim.job_id), adopted.model_dump_json().encode()):
            raise IdempotencyConflict(claim.job_id)  # another retry adopted it first
        log.warning("adopted the job of a submission that died before writing it", extra={"job_id": claim.job_id})
        return adopted

    def claim(self, idempotency_token: str) -> Claim | None:
        """The claim file's job id, queued mark and age, or None."""
        try:
            return _read_claim(self.root / "idempotency" / idempotency_token)
        except FileNotFoundError:
            return None

    def mark_enqueued(self, idempotency_token: str, job_id: str) -> None:
        """Add the queued mark to the claim file."""
        _write_atomically(self.root / "idempotency" / idempotency_token, f"{job_id}\n{ENQUEUED_MARK}\n".encode())

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


def _read_claim(path: Path) -> Claim:
    lines = path.read_text().split()
    age = time.time() - path.stat().st_mtime
    return Claim(job_id=lines[0] if lines else "", enqueued=ENQUEUED_MARK in lines[1:], age_s=age)


class LocalNotifier:
    """Exactly one JSON line per finished job in `notifications.jsonl`, and a log line.

    An outbox entry per job (`notices/<id>`) says `pending` before the line is appended and `sent`
    after: a call for a `sent` job does nothing, and one that finds `pending` (the writer was killed
    in between) looks in the file before appending. A lock file serializes writers across processes.
    """

    def __init__(self, path: Path):
        self.path = path
        self.outbox = path.parent / "notices"
        self.outbox.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._lock, (self.path.parent / ".notifications.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _already_written(self, job_id: str) -> bool:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return False
        for line in text.splitlines():
            with contextlib.suppress(ValueError):  # a line torn by a kill is not the job's notice
                notice = json.loads(line)
                if isinstance(notice, dict) and notice.get("job_id") == job_id:
                    return True
        return False

    def job_finished(self, record: JobRecord) -> None:
        """Append the job's announcement, unless it is there already."""
        entry = self.outbox / record.id
        with self._exclusive():
            state = entry.read_text() if entry.exists() else None
            if state == "sent":
                return
            if state == "pending" and self._already_written(record.id):  # killed before it could say `sent`
                _write_atomically(entry, b"sent")
                return
            _write_atomically(entry, b"pending")
            line = json.dumps(finished_notice(record)).encode() + b"\n"
            with self.path.open("ab+") as out:
                end = out.seek(0, os.SEEK_END)
                if end > 0:
                    out.seek(end - 1)
                    if out.read(1) != b"\n":  # a line cut short by a kill ends here: start a new one
                        line = b"\n" + line
                out.write(line)
                out.flush()
                os.fsync(out.fileno())
            _write_atomically(entry, b"sent")
        log.info("job finished", extra={"job_id": record.id, "state": record.state.value})
