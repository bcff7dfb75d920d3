"""The bearer token the benchmark sends, read from a file at every request: in the benchmark Job that file is a
Kubernetes Secret volume, which the kubelet rewrites when the Secret is renewed, so a run longer than one token's
life keeps going (llm_bench/cluster.py renews it)."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import httpx


class TokenFile(httpx.Auth):
    """`Authorization: Bearer <the file's contents>`, read afresh for each request."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def token(self) -> str:
        """The token as the file holds it now; a clear error when it is missing or empty."""
        try:
            value = self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise RuntimeError(f"cannot read the token file {self.path}: {exc.strerror}") from exc
        if not value:
            raise RuntimeError(f"the token file {self.path} is empty")
        return value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the header and send."""
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request
