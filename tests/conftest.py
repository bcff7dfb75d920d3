"""Fixtures shared across test folders: one live service per session (tests/app, tests/browser) and the
one synth of the app as shipped (tests/cdk, tests/rehearsal)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.support.pinned_node import use_pinned_node

use_pinned_node()  # before any test imports aws_cdk, whose jsii runtime spawns `node` from PATH

if TYPE_CHECKING:
    from tests.cdk.conftest import Synth


@pytest.fixture(scope="session")
def platform_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app as cdk.json ships it, but through the alb-https front door with an OIDC provider, an
    inbound allow-list and an alarm topic (tests/cdk/conftest.py DEFAULT_OVERRIDES)."""
    from tests.cdk.conftest import DEFAULT_OVERRIDES, synth  # aws_cdk only for the tests that synthesize

    return synth(tmp_path_factory.mktemp("cdk-default"), DEFAULT_OVERRIDES)


@pytest.fixture(scope="session")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real service (built-in model, CPU, UI on) on a free loopback port, shared by the session."""
    with serve(tmp_path_factory.mktemp("model-cache")) as live:
        yield live


@pytest.fixture(scope="session")
def held_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, FakeBackend]]:
    """The real HTTP stack and UI over a stand-in backend whose pipeline call a test can hold
    (`backend.release.clear()`), one request per batch, a queue of 4 and short limits, for tests of
    what happens around the model: queue bounds, departed clients, HTTP limits, UI errors."""
    backend = FakeBackend()
    with serve(
        tmp_path_factory.mktemp("unused"),
        loader=lambda _settings: backend,
        max_batch_size=1,
        queue_size=4,
        header_timeout_s=1.0,
        body_timeout_s=1.0,
        keep_alive_s=2.0,
        ui_file_ttl_s=1,
    ) as live:
        yield live, backend
