"""The completion marker: the last object written under a prefix, so that its presence means "complete".

Both the weights staging and the Neuron compile write their files first and the marker last; readers
and re-runs treat a prefix without a marker as unfinished.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from common.model_store.layout import COMPLETE_MARKER

log = logging.getLogger(__name__)


class MarkerTimeout(TimeoutError):
    """The completion marker did not appear in time."""


def marker_exists(s3: Any, bucket: str, prefix: str) -> bool:
    """True when `<prefix>_COMPLETE.json` exists; other S3 errors (access denied, ...) propagate."""
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=bucket, Key=prefix + COMPLETE_MARKER)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def write_marker(s3: Any, bucket: str, prefix: str, record: dict[str, Any]) -> None:
    """Write the marker with `record` (what was published) as its JSON body."""
    s3.put_object(Bucket=bucket, Key=prefix + COMPLETE_MARKER, Body=json.dumps(record, indent=2).encode())


def wait_for_marker(
    s3: Any,
    *,
    bucket: str,
    prefix: str,
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Block until `<prefix>_COMPLETE.json` exists (`prefix` taken as a folder), or raise MarkerTimeout after
    `timeout_s`: what a reader of a published prefix waits for (the Neuron pods, the LLM pods)."""
    prefix = prefix.rstrip("/") + "/"
    deadline = clock() + timeout_s
    while not marker_exists(s3, bucket, prefix):
        if clock() >= deadline:
            raise MarkerTimeout(f"s3://{bucket}/{prefix}{COMPLETE_MARKER} did not appear within {timeout_s:g} s")
        log.info("waiting for s3://%s/%s%s", bucket, prefix, COMPLETE_MARKER)
        sleep(poll_s)
