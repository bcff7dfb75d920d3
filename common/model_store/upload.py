"""Upload a local folder's files below an S3 prefix."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def upload_files(s3: Any, bucket: str, root: Path, relative_paths: Iterable[str], prefix: str) -> list[str]:
    """Upload `root/<path>` to `<prefix><path>` for each path (in sorted order); returns the paths uploaded.

    boto3's managed transfer splits large files into parallel multipart uploads by itself.
    """
    uploaded = []
    for relative in sorted(relative_paths):
        s3.upload_file(str(root / relative), bucket, prefix + relative)
        uploaded.append(relative)
    return uploaded
