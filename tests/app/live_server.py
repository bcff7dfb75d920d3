"""A real uvicorn server on a free loopback port, serving create_app() from a background thread, waited for as
common/server_process.py waits for a server process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.backends.base import Backend
from app.backends.selection import load_backend
from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.settings import Settings, load_settings
from common.server_process import wait_until_answers

# Small and quick: 64x64 images, at most 8 steps, so a whole session stays well inside the budget.
TEST_SETTINGS = {
    "backend": "cpu",
    "default_steps": 2,
    "max_steps": 8,
    "min_size": 64,
    "max_size": 128,
    "default_width": 64,
    "default_height": 64,
    "max_prompt_chars": 200,
    "max_batch_size": 4,
    "batch_wait_ms": 100.0,
    "queue_size": 8,
    "request_timeout_s": 60.0,
    "max_body_bytes": 4096,
    "jobs": "off",  # tests of jobs turn them on with a fresh JOBS_DIR (tests/app/test_jobs_*.py)
}


@dataclass
class LiveServer:
    """A running server: its URL, its app's service, and what /readiness said before the model loaded."""

    url: str
    settings: Settings
    app: object
    readiness_before_load: int | None = None
    health_before_load: int | None = None

    @property
    def service(self):  # app.service.GenerationService
        """The GenerationService behind the routes."""
        return self.app.state.service


@contextmanager
def serve(
    cache_dir: Path, loader: Callable[[Settings], Backend] = load_backend, **overrides: object
) -> Iterator[LiveServer]:
    """Start a server whose model load waits until /readiness has answered once, and yield it once ready."""
    settings = load_settings(**{**TEST_SETTINGS, "model_cache_dir": cache_dir, **overrides})
    gate = threading.Event()

    def gated_loader(s: Settings) -> Backend:
        gate.wait(timeout=60)  # lets the fixture observe readiness before the model exists
        return loader(s)

    app = create_app(settings, gated_loader)
    with serve_in_thread(app) as url:
        live = LiveServer(url=url, settings=settings, app=app)
        with httpx.Client(base_url=live.url, timeout=10) as client:
            live.health_before_load = client.get("/health").status_code
            live.readiness_before_load = client.get("/readiness").status_code
        gate.set()

        def gone() -> str | None:
            error = live.service.load_error
            return f"the model did not load: {error}" if error else None

        wait_until_answers(f"{url}/readiness", timeout_s=180, gone=gone, poll_s=0.1)
        try:
            yield live
        finally:
            gate.set()
