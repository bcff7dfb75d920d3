"""Fixtures shared across test folders: one live service per session (tests/app, tests/browser), the
one synth of the app as shipped and the one of the trial profile (tests/cdk, tests/rehearsal), the one local
LLM stack (tests/llm, tests/rehearsal) and the one Chromium (tests/browser, tests/llm). The tiers
(tests/support/tiers.py) mark each test by the fixtures it uses; the heavy modules are imported inside the
fixtures, so the fast tier (`pytest --fast`) never loads them for nothing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.pinned_node import use_pinned_node

use_pinned_node()  # before any test imports aws_cdk, whose jsii runtime spawns `node` from PATH

pytest_plugins = ["tests.support.tiers", "tests.support.worker_groups", "tests.support.held_ports", "pytester"]

if TYPE_CHECKING:
    from tests.app.fakes import FakeBackend
    from tests.app.live_server import LiveServer
    from tests.cdk.conftest import Synth
    from tests.llm.stack import LocalStack

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Offline machines refuse many of Chromium's background connections; these flags stop them.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def platform_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app as cdk.json ships it, but through the alb-https front door with an OIDC provider, an
    inbound allow-list and an alarm topic (tests/cdk/conftest.py DEFAULT_OVERRIDES)."""
    from tests.cdk.conftest import DEFAULT_OVERRIDES, synth  # aws_cdk only for the tests that synthesize

    return synth(tmp_path_factory.mktemp("cdk-default"), DEFAULT_OVERRIDES)


@pytest.fixture(scope="session")
def sdxl_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`-c imageModel=sdxl-base` over cdk.json: the one extra synth the image model tests and the SDXL pod rehearsal
    share (tests/cdk/conftest.py SDXL_OVERRIDES)."""
    from tests.cdk.conftest import SDXL_OVERRIDES, synth

    return synth(tmp_path_factory.mktemp("cdk-sdxl"), SDXL_OVERRIDES)


@pytest.fixture(scope="session")
def flux_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`-c imageModel=flux-schnell` over cdk.json: only the Flux pod rehearsal takes it (tests/rehearsal/)."""
    from tests.cdk.conftest import FLUX_OVERRIDES, synth

    return synth(tmp_path_factory.mktemp("cdk-flux"), FLUX_OVERRIDES)


@pytest.fixture(scope="session")
def trial_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """`-c profile=trial`: one accelerator behind the starting gate, no LLM, trimmed logging (only the trial tests
    and the starting gate's rehearsal take it, so a run without them synthesizes nothing more)."""
    from tests.cdk.conftest import TRIAL_OVERRIDES, synth

    return synth(tmp_path_factory.mktemp("cdk-trial"), TRIAL_OVERRIDES)


@pytest.fixture(scope="session")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real service (built-in model, CPU, UI on) on a free loopback port, shared by the session."""
    from tests.app.live_server import serve

    with serve(tmp_path_factory.mktemp("model-cache")) as live:
        yield live


@pytest.fixture(scope="session")
def held_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, FakeBackend]]:
    """The real HTTP stack and UI over a stand-in backend whose pipeline call a test can hold
    (`backend.release.clear()`), one request per batch, a queue of 4 and short limits, for tests of
    what happens around the model: queue bounds, departed clients, HTTP limits, UI errors."""
    from tests.app.fakes import FakeBackend
    from tests.app.live_server import serve

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
    from llm_local.vllm_env import NoInterpreter, ensure_env

    try:
        return ensure_env()
    except (NoInterpreter, RuntimeError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but vLLM's CPU environment could not be built: {exc}")
        pytest.skip(f"vLLM's CPU environment could not be built here: {exc}")


@pytest.fixture(scope="session")
def local_stack(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`python -m llm_local` on free loopback ports, ready; stopped with SIGTERM, engine included, at the end."""
    from tests.llm.stack import run_local_stack

    with run_local_stack(tmp_path_factory.mktemp("llm-local")) as stack:
        yield stack


@pytest.fixture(scope="session")
def engine_url(local_stack: LocalStack) -> str:
    """vLLM's own URL in the session's stack (for its /metrics and /tokenize, and for extra gateways)."""
    return local_stack.engine_url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright, one per test module (each test opens its own pages). Not one per
    session: Playwright's sync API holds an event loop in the main thread while it runs, where a later test's
    asyncio.run() would fail. Without Chromium it skips with the reason on a laptop and fails in CI (CI=true)."""
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no Chromium at {CHROMIUM}; .ci/run installs it with apt")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
