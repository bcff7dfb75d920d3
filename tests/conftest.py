"""Fixtures shared across test folders: one live service per session (tests/app, tests/browser), the
one synth of the app as shipped (tests/cdk, tests/rehearsal) and the one local LLM stack (tests/llm,
tests/rehearsal)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from llm_local.vllm_env import NoInterpreter, ensure_env
from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve
from tests.llm.stack import LocalStack, run_local_stack
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


@pytest.fixture(scope="session")
def vllm_env() -> Path:
    """vLLM's CPU environment: built on first use (minutes), then cached under .cache/vllm-cpu-env.
    In CI (CI=true) a missing environment that cannot be built fails; on a laptop it skips with the reason."""
    try:
        return ensure_env()
    except (NoInterpreter, RuntimeError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but vLLM's CPU environment could not be built: {exc}")
        pytest.skip(f"vLLM's CPU environment could not be built here: {exc}")


@pytest.fixture(scope="session")
def local_stack(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`python -m llm_local` on free loopback ports, ready; stopped with SIGTERM, engine included, at the end."""
    with run_local_stack(tmp_path_factory.mktemp("llm-local")) as stack:
        yield stack


@pytest.fixture(scope="session")
def engine_url(local_stack: LocalStack) -> str:
    """vLLM's own URL in the session's stack (for its /metrics and /tokenize, and for extra gateways)."""
    return local_stack.engine_url
