"""Fixtures shared by tests/app and tests/browser: one live service per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.app.live_server import LiveServer, serve


@pytest.fixture(scope="session")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real service (built-in model, CPU, UI on) on a free loopback port, shared by the session."""
    with serve(tmp_path_factory.mktemp("model-cache")) as live:
        yield live
