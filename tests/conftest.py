"""Fixtures shared by tests/app and tests/browser: one live service per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.app.live_server import LiveServer, serve
from tests.support.pinned_node import use_pinned_node

use_pinned_node()  # before any test imports aws_cdk, whose jsii runtime spawns `node` from PATH


@pytest.fixture(scope="session")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real service (built-in model, CPU, UI on) on a free loopback port, shared by the session."""
    with serve(tmp_path_factory.mktemp("model-cache")) as live:
        yield live
