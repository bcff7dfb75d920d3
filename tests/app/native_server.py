"""A live service whose model reports a native size other than the settings' bounds suggest, and whose
load waits for the test: for what clients see before and after the model is ready."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.service import GenerationService
from app.settings import Settings, load_settings
from tests.app.fakes import FakeBackend
from tests.app.live_server import TEST_SETTINGS

NATIVE_SIZE = (96, 112)  # neither MIN_SIZE (64) nor any size the settings name


@dataclass
class GatedServer:
    """A running server; `load.set()` lets its model finish loading."""

    url: str
    service: GenerationService
    load: threading.Event


@contextmanager
def serve_gated(cache_dir: Path, **overrides: object) -> Iterator[GatedServer]:
    """Serve the app over a FakeBackend of NATIVE_SIZE with no DEFAULT_WIDTH/HEIGHT; the model loads
    once the test sets `load` (the server stops waiting after 120 s)."""
    settings = load_settings(
        **{**TEST_SETTINGS, "model_cache_dir": cache_dir, "default_width": None, "default_height": None, **overrides}
    )
    load = threading.Event()
    backend = FakeBackend(native_size=NATIVE_SIZE)

    def loader(_settings: Settings) -> FakeBackend:
        load.wait(timeout=120)
        return backend

    app = create_app(settings, loader)
    with serve_in_thread(app) as url:
        try:
            yield GatedServer(url=url, service=app.state.service, load=load)
        finally:
            load.set()
