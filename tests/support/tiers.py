"""The test tiers: which tests need what slow thing, decided by what they use (docs/testing.md).

A test is marked with a tier when its folder is that tier (TIER_OF_FOLDER), when its fixture closure holds a
fixture that builds or starts the tier's thing (TIER_OF_FIXTURE), when it is parametrized with such a
fixture's name (the `request.getfixturevalue(name)` pattern), or when its module uses a starter of the
tier's thing (TIER_OF_STARTER). A tier fixture set up for a test without its
marker (asked for some other way) fails that test, so the fast tier can never build vLLM's environment,
synthesize or start a sandbox by accident. `pytest --fast` deselects every slow tier and skips collecting
the folders that are wholly one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]

# The slow tiers' markers (pyproject.toml registers them, with what each needs).
TIERS: tuple[str, ...] = ("server", "engine", "sandbox", "contract", "synth", "browser", "gpu")
FAST_MARKEXPR = "not (" + " or ".join(TIERS) + ")"

# Folders under tests/ that are one tier throughout.
TIER_OF_FOLDER: dict[str, str] = {"rehearsal": "sandbox", "contract": "contract", "browser": "browser", "gpu": "gpu"}
# Fixtures that build or start a tier's thing (a fixture that uses one is in its closure too).
TIER_OF_FIXTURE: dict[str, str] = {
    "platform_synth": "synth",  # tests/conftest.py
    "variant_synth": "synth",  # tests/cdk/conftest.py
    "serving": "synth",  # tests/cdk/conftest.py: views of the two synths, which tests also ask for by name
    "capacity_serving": "synth",
    "vllm_env": "engine",  # tests/conftest.py; local_stack, engine_url and gateway use it
    "neuron_python": "contract",  # tests/contract/test_neuron_contract.py
    "seed_dir": "contract",  # tests/rehearsal/conftest.py: written by the Neuron image's Python (the contract venv)
    "stacks": "sandbox",  # tests/rehearsal/conftest.py: the containers to rehearse
    "browser": "browser",  # tests/conftest.py
    "live_service": "server",  # tests/conftest.py: the service with the built-in model
}
# Functions that start the image service or build a model to run; a test module that holds one is that tier.
TIER_OF_STARTER: dict[str, str] = {
    "app.models.random_pipeline.materialize": "server",  # a random-weight pipeline, run with torch
    "tests.support.app_process.run_app": "server",  # python -m app
    "app.bench.inprocess.serve_in_thread": "server",  # uvicorn in a thread (a service, maybe a stand-in's)
    "tests.app.live_server.serve": "server",  # in-process (its loader may be a stand-in: still a full start)
    "tests.app.jobs_server.serve_jobs": "server",
    "tests.app.native_server.serve_gated": "server",
}

_RUNNING = pytest.StashKey[pytest.Item]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """--fast: the fast tier."""
    parser.addoption(
        "--fast",
        action="store_true",
        help=f"run only the fast tier: -m '{FAST_MARKEXPR}' (and skip collecting folders of one slow tier)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Apply --fast: the slow tiers deselected, on top of any -m given."""
    if config.getoption("fast"):
        given = config.option.markexpr
        config.option.markexpr = f"({given}) and {FAST_MARKEXPR}" if given else FAST_MARKEXPR


def folder_tier(path: Path) -> str | None:
    """The tier of the tests/ folder holding `path`, if that folder is one tier throughout."""
    try:
        relative = path.resolve().relative_to(TESTS_DIR)
    except ValueError:
        return None
    return TIER_OF_FOLDER.get(relative.parts[0]) if relative.parts else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --fast, a folder of one slow tier is not even imported."""
    if config.getoption("fast") and collection_path.is_dir() and folder_tier(collection_path) is not None:
        return True
    return None


def tiers_of(item: pytest.Item) -> set[str]:
    """The tiers `item` belongs to by its folder, its fixtures and the fixture names it is parametrized with."""
    tiers = {tier} if (tier := folder_tier(item.path)) else set()
    used = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        used |= {value for value in callspec.params.values() if isinstance(value, str)}
    tiers |= {TIER_OF_FIXTURE[name] for name in used & TIER_OF_FIXTURE.keys()}
    module = getattr(item, "module", None)
    if module is not None:
        held = {f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}" for obj in vars(module).values()}
        tiers |= {tier for starter, tier in TIER_OF_STARTER.items() if starter in held}
    return tiers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tiers."""
    for item in items:
        for tier in sorted(tiers_of(item)):
            item.add_marker(tier)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Remember the running test, for the check below."""
    item.config.stash[_RUNNING] = item
    try:
        return (yield)
    finally:
        del item.config.stash[_RUNNING]


def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> None:
    """A tier fixture set up for a test that is not marked with the tier fails that test."""
    tier = TIER_OF_FIXTURE.get(fixturedef.argname)
    item = request.config.stash.get(_RUNNING, None)
    if tier is not None and item is not None and item.get_closest_marker(tier) is None:
        pytest.fail(
            f"{item.nodeid} sets up {fixturedef.argname!r} (tier {tier!r}) without the {tier!r} marker: take the "
            f"fixture as an argument, parametrize with its name, or mark the test @pytest.mark.{tier}",
            pytrace=False,
        )
