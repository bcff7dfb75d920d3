"""The announcement of a finished job, the same on SNS and in the local notifications file."""

from __future__ import annotations

from typing import Any

from app.jobs.model import JobRecord

NOTICE_VERSION = 1


def finished_notice(record: JobRecord) -> dict[str, Any]:
    """The message body: which job, its outcome and where to read it (no image URL: those expire)."""
    return {
        "version": NOTICE_VERSION,
        "job_id": record.id,
        "owner": record.owner,
        "state": record.state.value,
        "error": record.error,
        "attempts": record.attempts,
        "finished_at": record.finished_at,
        "status_path": f"/v1/jobs/{record.id}",
    }
