"""A live server with jobs on (local backend, fresh JOBS_DIR) and a stand-in caller identity.

The `X-Test-Caller` header plays the authentication layer: it sets `request.state.caller_id`, the
one thing `get_caller_id` reads, so tests can act as several clients.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.backends.base import Backend
from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.settings import Settings, load_settings
from tests.app.live_server import TEST_SETTINGS

CALLER_HEADER = b"x-test-caller"


def with_test_caller(app: Any) -> Any:
    """Wrap an ASGI app so that `X-Test-Caller: name` authenticates the request as `name`."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            caller = dict(scope["headers"]).get(CALLER_HEADER)
            if caller:
                scope.setdefault("state", {})["caller_id"] = caller.decode()
        await app(scope, receive, send)

    return wrapped


@dataclass
class JobsServer:
    """A running server with jobs: its URL, settings, app and JOBS_DIR."""

    url: str
    settings: Settings
    app: Any
    jobs_dir: Path

    def wait_for(self, client: httpx.Client, job_id: str, timeout_s: float = 60, **headers: str) -> dict[str, Any]:
        """Poll GET /v1/jobs/{id} until the job is finished; its last status."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
            if status["state"] in ("succeeded", "failed"):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {status['state']} after {timeout_s} s")
            time.sleep(0.05)


@contextmanager
def serve_jobs(tmp: Path, loader: Callable[[Settings], Backend], **overrides: object) -> Iterator[JobsServer]:
    """Serve create_app() with JOBS=local under `tmp`, once ready."""
    settings = load_settings(
        **{
            **TEST_SETTINGS,
            "model_cache_dir": tmp / "models",
            "jobs": "local",
            "jobs_dir": tmp / "jobs",
            "jobs_poll_s": 1.0,
            "ui": False,
            **overrides,
        }
    )
    app = create_app(settings, loader)
    with serve_in_thread(with_test_caller(app), settings) as url:
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/readiness").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready")
            time.sleep(0.05)
        yield JobsServer(url=url, settings=settings, app=app, jobs_dir=tmp / "jobs")
