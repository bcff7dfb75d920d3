"""Mirror S3 prefixes into local folders (after common.model_store.marker.wait_for_marker, when asked)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.model_store.download import download_s3_prefix

log = logging.getLogger("model_fetch")


@dataclass(frozen=True)
class Transfer:
    """One S3 prefix and the folder it is mirrored into."""

    prefix: str
    dest: Path


def folder_prefix(prefix: str) -> str:
    """`prefix` as a folder (ending in one `/`), the form the marker's key is built on."""
    return prefix.rstrip("/") + "/"


def fetch(s3: Any, bucket: str, transfers: Sequence[Transfer]) -> list[Path]:
    """Mirror each transfer's prefix into its folder (files already there unchanged are skipped)."""
    done = []
    for transfer in transfers:
        download_s3_prefix(bucket, folder_prefix(transfer.prefix), transfer.dest, client=s3)
        log.info("s3://%s/%s is in %s", bucket, folder_prefix(transfer.prefix), transfer.dest)
        done.append(transfer.dest)
    return done
