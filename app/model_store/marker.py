"""The completion marker: the last object written under a prefix, so that its presence means "complete".

Both the weights staging and the Neuron compile write their files first and the marker last; readers
and re-runs treat a prefix without a marker as unfinished.
"""

from __future__ import annotations

import json
from typing import Any

from app.model_store.layout import COMPLETE_MARKER


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
