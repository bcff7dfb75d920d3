"""The test tiers: which tests need what slow thing, decided by what they use (docs/testing.md).

A test is marked with a tier when its folder is that tier (TIER_OF_FOLDER), when its fixture closure holds a
fixture that builds or starts the tier's thing (TIER_OF_FIXTURE), when it is parametrized with such a
fixture's name (the `request.getfixturevalue(name)` pattern), or when its module imports a starter of the
tier's thing (TIER_OF_STARTER) or a library that is slow to import (TIER_OF_LIBRARY). A tier fixture set up
for a test without its marker (asked for some other way) fails that test, so the fast tier can never build
vLLM's environment, synthesize or start a sandbox by accident. `pytest --fast` deselects every slow tier and
does not even import the folders and modules whose every test is in one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]

# The slow tiers' markers (pyproject.toml registers them, with what each needs).
TIERS: tuple[str, ...] = ("server", "process", "engine", "sandbox", "contract", "synth", "browser", "gpu")
FAST_MARKEXPR = "not (" + " or ".join(TIERS) + ")"

# Folders under tests/ that are one tier throughout.
TIER_OF_FOLDER: dict[str, str] = {"rehearsal": "sandbox", "contract": "contract", "browser": "browser", "gpu": "gpu"}
# Fixtures that build or start a tier's thing (a fixture that uses one is in its closure too).
TIER_OF_FIXTURE: dict[str, str] = {
    "platform_synth": "synth",  # tests/conftest.py
    "variant_synth": "synth",  # tests/cdk/conftest.py
    "sdxl_synth": "synth",  # tests/conftest.py: -c imageModel=sdxl-base
    "flux_synth": "synth",  # tests/conftest.py: -c imageModel=flux-schnell
    "trial_synth": "synth",  # tests/conftest.py: -c profile=trial
    "serving": "synth",  # tests/cdk/conftest.py: views of the two synths, which tests also ask for by name
    "capacity_serving": "synth",
    "vllm_env": "engine",  # tests/conftest.py; local_stack, engine_url and gateway use it
    "cpu_workers": "engine",  # tests/llm/test_router_rehearsal.py: two CPU engines behind gateways
    "neuron_python": "contract",  # tests/contract/test_neuron_contract.py
    "seed_dir": "contract",  # tests/rehearsal/conftest.py: written by the Neuron image's Python (the contract venv)
    "stacks": "sandbox",  # tests/rehearsal/conftest.py: the containers to rehearse
    "sdxl_stacks": "sandbox",  # tests/rehearsal/conftest.py: the SDXL preset's containers
    "flux_stacks": "sandbox",  # tests/rehearsal/conftest.py: the FLUX.1-schnell preset's containers
    "image_model_stacks": "sandbox",  # tests/rehearsal/test_image_model_pods.py: the SDXL or the Flux preset's
    "trial_stacks": "sandbox",  # tests/rehearsal/conftest.py: the trial profile's (the starting gate)
    "browser": "browser",  # tests/conftest.py
    "live_service": "server",  # tests/conftest.py: the service with the built-in model
    "held_service": "server",  # tests/conftest.py: the service (Gradio UI included) over a stand-in backend
}
# Libraries whose mere import costs seconds; a test module that imports one at its top is that tier.
TIER_OF_LIBRARY: dict[str, str] = {
    "torch": "server",
    "diffusers": "server",
    "transformers": "server",
    "gradio": "server",
    "aws_cdk": "synth",  # the CDK's jsii runtime: a Node process and seconds before the first construct
}
# Functions that start the image service or build a model to run; a test module that imports one is that tier.
TIER_OF_STARTER: dict[str, str] = {
    "app.models.random_pipeline.materialize": "server",  # a random-weight pipeline, run with torch
    "tests.support.app_process.run_app": "server",  # python -m app
    "app.bench.inprocess.serve_in_thread": "server",  # uvicorn in a thread (a service, maybe a stand-in's)
    "tests.app.live_server.serve": "server",  # in-process (its loader may be a stand-in: still a full start)
    "tests.app.jobs_server.serve_jobs": "server",
    "tests.app.native_server.serve_gated": "server",
    "tests.support.family_folders.saved_folder": "server",  # builds a tiny model and saves it
    "tests.llm.stack.run_gateway": "server",  # python -m llm_gateway as a process
    "tests.llm.stack.run_standin": "server",  # the pace stand-in engine as a process
    "common.server_process.serve_process": "server",  # any service as a process
}

# `make test` spreads the tests over both cores (pytest-xdist, `-n 2 --dist loadgroup`). The tiers whose fixtures
# build one thing per session (a synthesis, the sandbox stacks made from it, the Neuron contract venv, vLLM's
# engine) run as one group on one worker, so each is built once per run and never by two workers at once; every
# other test runs with the rest of its module, so a module's fixtures are set up once.
SESSION_BUILD_TIERS = frozenset({"engine", "synth", "sandbox", "contract"})
SESSION_BUILD_GROUP = "session-builds"

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


def _mark_tier(node: ast.expr) -> str | None:
    """X for `pytest.mark.X` (a decorator or a pytestmark entry) when X is a tier."""
    return node.attr if isinstance(node, ast.Attribute) and node.attr in TIERS else None


@cache
def module_tier(path: Path) -> str | None:
    """The tier of every test of a test module, read from its source without importing it: the tier of a
    library (TIER_OF_LIBRARY) or a starter (TIER_OF_STARTER) it imports at its top, of its module-level
    `pytestmark = pytest.mark.<tier>`, or the one tier of a tier fixture (or marker) every test function of it
    takes. None when not every test is known to be in one tier; its tests are then classified one by one."""
    body = ast.parse(path.read_bytes(), str(path)).body
    per_test: list[set[str]] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if tier := TIER_OF_LIBRARY.get(module.split(".")[0]):
                    return tier
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if tier := TIER_OF_STARTER.get(f"{node.module}.{alias.name}"):
                    return tier
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            for mark in marks:
                if tier := _mark_tier(mark):
                    return tier
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return None  # tests in classes: classified one by one
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            arguments = {arg.arg for arg in node.args.args}
            tiers = {TIER_OF_FIXTURE[name] for name in arguments & TIER_OF_FIXTURE.keys()}
            tiers |= {tier for decorator in node.decorator_list if (tier := _mark_tier(decorator))}
            per_test.append(tiers)
    common = set.intersection(*per_test) if per_test else set()
    return min(common) if common else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --fast, a folder of one slow tier, or a module whose every test is in one, is not even imported
    (their imports, torch and the like, are most of a collection's time)."""
    if not config.getoption("fast"):
        return None
    if collection_path.is_dir():
        return True if folder_tier(collection_path) is not None else None
    if collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return True if module_tier(collection_path) is not None else None
    return None


def tiers_of(item: pytest.Item) -> set[str]:
    """The tiers `item` belongs to by its folder, its fixtures and the fixture names it is parametrized with."""
    tiers = {tier} if (tier := folder_tier(item.path)) else set()
    used = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        used |= {value for value in callspec.params.values() if isinstance(value, str)}
    tiers |= {TIER_OF_FIXTURE[name] for name in used & TIER_OF_FIXTURE.keys()}
    if item.path.suffix == ".py" and (tier := module_tier(item.path)):
        tiers.add(tier)
    return tiers


def worker_group(item: pytest.Item, tiers: set[str]) -> str:
    """The pytest-xdist group `item` runs in: the session builds' group, or its module's."""
    return SESSION_BUILD_GROUP if tiers & SESSION_BUILD_TIERS else item.nodeid.partition("::")[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tiers and its worker group."""
    for item in items:
        tiers = tiers_of(item)
        for tier in sorted(tiers):
            item.add_marker(tier)
        item.add_marker(pytest.mark.xdist_group(worker_group(item, tiers)))


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
