"""Wait for a completion marker, then mirror S3 prefixes into local folders."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.model_store.download import download_s3_prefix
from app.model_store.layout import COMPLETE_MARKER
from app.model_store.marker import marker_exists

log = logging.getLogger("model_fetch")


class MarkerTimeout(TimeoutError):
    """The completion marker did not appear in time."""


@dataclass(frozen=True)
class Transfer:
    """One S3 prefix and the folder it is mirrored into."""

    prefix: str
    dest: Path


def folder_prefix(prefix: str) -> str:
    """`prefix` as a folder (ending in one `/`), the form the marker's key is built on."""
    return prefix.rstrip("/") + "/"


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
    """Block until `<prefix>_COMPLETE.json` exists, or raise MarkerTimeout after `timeout_s`."""
    prefix = folder_prefix(prefix)
    deadline = clock() + timeout_s
    while not marker_exists(s3, bucket, prefix):
        if clock() >= deadline:
            raise MarkerTimeout(f"s3://{bucket}/{prefix}{COMPLETE_MARKER} did not appear within {timeout_s:g} s")
        log.info("waiting for s3://%s/%s%s", bucket, prefix, COMPLETE_MARKER)
        sleep(poll_s)


def fetch(s3: Any, bucket: str, transfers: Sequence[Transfer]) -> list[Path]:
    """Mirror each transfer's prefix into its folder (files already there unchanged are skipped)."""
    done = []
    for transfer in transfers:
        download_s3_prefix(bucket, folder_prefix(transfer.prefix), transfer.dest, client=s3)
        log.info("s3://%s/%s is in %s", bucket, folder_prefix(transfer.prefix), transfer.dest)
        done.append(transfer.dest)
    return done
