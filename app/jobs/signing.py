"""Short-lived links to a job's image for the local backend, the counterpart of S3 presigned URLs.

A link carries its expiry and an HMAC of (job id, expiry) under a key kept in the jobs directory,
so it works without the caller's credentials, for a limited time, and survives a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path


class UrlSigner:
    """Signs and checks (job id, expiry) pairs."""

    def __init__(self, key: bytes):
        self._key = key

    @classmethod
    def from_file(cls, path: Path) -> UrlSigner:
        """Load the key, creating it (owner-only permissions) on first use."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return cls(path.read_bytes())
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as out:
            out.write(key)
        return cls(key)

    def _mac(self, job_id: str, expires: int) -> str:
        return hmac.new(self._key, f"{job_id}:{expires}".encode(), hashlib.sha256).hexdigest()

    def sign(self, job_id: str, ttl_s: int) -> tuple[int, str]:
        """(expiry as a Unix time, signature)."""
        expires = int(time.time()) + ttl_s
        return expires, self._mac(job_id, expires)

    def valid(self, job_id: str, expires: int, signature: str) -> bool:
        """True if the signature matches and the link has not expired."""
        # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError, not a mismatch).
        return expires >= time.time() and hmac.compare_digest(self._mac(job_id, expires).encode(), signature.encode())
