"""Download a model folder from an S3 prefix into the local cache, once.

Files already present with the same size (and the same ETag, remembered in a small sidecar
file) are skipped, so a restarted pod reuses what it has instead of fetching gigabytes again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_ETAGS_FILE = ".s3-etags.json"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split s3://bucket/prefix into (bucket, prefix); a ValueError for anything else."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, prefix


def download_s3_prefix(bucket: str, prefix: str, destination: Path, client: Any = None) -> Path:
    """Mirror every object under s3://bucket/prefix into `destination`; return `destination`."""
    if client is None:
        import boto3

        client = boto3.client("s3")
    destination.mkdir(parents=True, exist_ok=True)
    etags_path = destination / _ETAGS_FILE
    etags: dict[str, str] = json.loads(etags_path.read_text()) if etags_path.is_file() else {}
    base = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    found = downloaded = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base):
        for obj in page.get("Contents", []):
            key: str = obj["Key"]
            relative = key[len(base) :]
            if not relative or relative.endswith("/"):
                continue  # folder placeholder objects
            target = (destination / relative).resolve()
            if destination.resolve() not in target.parents:
                raise ValueError(f"refusing S3 key outside the cache folder: {key!r}")
            found += 1
            if target.is_file() and target.stat().st_size == obj["Size"] and etags.get(relative) == obj["ETag"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            client.download_file(bucket, key, str(partial))
            partial.replace(target)
            etags[relative] = obj["ETag"]
            downloaded += 1
    if not found:
        raise FileNotFoundError(f"no objects under s3://{bucket}/{base}")
    etags_path.write_text(json.dumps(etags, indent=0, sort_keys=True))
    log.info("model from s3://%s/%s: %d files, %d downloaded", bucket, base, found, downloaded)
    return destination
