"""The tiers classify a test by what it uses (tests/support/tiers.py): a test that takes a slow fixture, itself or
through another, or is parametrized with its name, is left out of `pytest --fast`; a test that reaches one some
other way fails rather than build it; the folders and modules of one tier are not even imported."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.tiers import FAST_MARKEXPR, TESTS_DIR, TIERS, folder_tier

# A stand-in `vllm_env` (the engine tier's fixture) and every way a test can come to it.
TOY_TESTS = """
import pytest

@pytest.fixture(scope="session")
def vllm_env():
    return "built"

@pytest.fixture
def engine_url(vllm_env):
    return vllm_env

def test_plain():
    pass

def test_takes_it(vllm_env):
    pass

def test_takes_it_through_another(engine_url):
    pass

@pytest.mark.parametrize("name", ["vllm_env"])
def test_named_in_a_parameter(request, name):
    request.getfixturevalue(name)

def test_reaches_it_unmarked(request):
    request.getfixturevalue("vllm_env")
"""


def test_the_fast_tier_leaves_out_every_test_that_uses_a_slow_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=TOY_TESTS)
    result = pytester.runpytest("-p", "tests.support.tiers", "--fast", "-q")
    result.assert_outcomes(passed=1, failed=1, deselected=3)
    result.stdout.fnmatch_lines(
        ["*test_reaches_it_unmarked sets up 'vllm_env' (tier 'engine') without the 'engine' marker*"]
    )


def test_the_engine_tier_is_exactly_the_tests_that_use_the_engine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_toy=TOY_TESTS)
    result = pytester.runpytest("-p", "tests.support.tiers", "-m", "engine", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_toy.py::test_takes_it",
            "test_toy.py::test_takes_it_through_another",
            "test_toy.py::test_named_in_a_parameter[vllm_env]",
            "3/5 tests collected (2 deselected)*",
        ]
    )


def test_the_fast_tier_does_not_even_import_a_module_whose_every_test_is_slow(pytester: pytest.Pytester) -> None:
    # Each would fail its collection if it were imported.
    pytester.makepyfile(
        test_marked="import pytest\nimport not_installed_anywhere\npytestmark = pytest.mark.synth\n"
        "def test_one():\n    pass\n",
        test_heavy="import torch\nimport not_installed_anywhere\ndef test_one():\n    pass\n",
        test_starts="from tests.support.app_process import run_app\nimport not_installed_anywhere\n"
        "def test_one():\n    pass\n",
        test_all_synth="import not_installed_anywhere\ndef test_one(platform_synth):\n    pass\n",
        test_fast="def test_one():\n    pass\n",
    )
    result = pytester.runpytest("-p", "tests.support.tiers", "--fast", "-q")
    result.assert_outcomes(passed=1)


def test_a_folder_of_one_tier_is_that_tier() -> None:
    assert folder_tier(TESTS_DIR / "rehearsal" / "test_pods.py") == "sandbox"
    assert folder_tier(TESTS_DIR / "browser") == "browser"
    assert folder_tier(TESTS_DIR / "llm" / "test_errors.py") is None
    assert folder_tier(TESTS_DIR.parent / "app") is None


def test_every_tier_is_registered_and_left_out_of_the_fast_tier(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert set(TIERS) <= registered
    assert FAST_MARKEXPR == "not (server or process or engine or sandbox or contract or synth or browser or gpu)"


# Two session builds (stand-ins that note each build in a file) used from two modules, and plain tests beside them.
BUILDS_CONFTEST = """
import os
import pytest

def _build(name):
    with open(os.environ["BUILDS_LOG"], "a") as log:
        log.write(name + "\\n")
    return name

@pytest.fixture(scope="session")
def platform_synth():
    return _build("synth")

@pytest.fixture(scope="session")
def vllm_env():
    return _build("engine")
"""
BUILDS_MODULE = """
import time

def test_synth_{n}(platform_synth):
    time.sleep(0.2)

def test_engine_{n}(vllm_env):
    time.sleep(0.2)

def test_plain_{n}_1():
    time.sleep(0.2)

def test_plain_{n}_2():
    time.sleep(0.2)
"""


def test_make_tests_workers_build_each_session_thing_once_and_keep_modules_whole(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`make test`'s two workers: the tests of the session builds run on one of them, so a synth or the engine is
    built once per run; the other tests stay with their module."""
    builds = tmp_path / "builds.log"
    monkeypatch.setenv("BUILDS_LOG", str(builds))
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR.parent))
    pytester.makeconftest(BUILDS_CONFTEST)
    pytester.makepyfile(**{f"test_mod{n}": BUILDS_MODULE.format(n=n) for n in range(3)})
    result = pytester.runpytest_subprocess(
        "-p", "tests.support.tiers", "-p", "tests.support.worker_groups", "-n", "2", "--dist", "loadgroup", "-v"
    )  # fmt: skip
    result.assert_outcomes(passed=12)
    worker_of = {
        match["test"]: match["worker"]
        for line in result.outlines
        if (match := re.search(r"\[(?P<worker>gw\d)\] \[ *\d+%\] PASSED \S+::(?P<test>\w+)", line))
    }
    assert len(worker_of) == 12, result.outlines
    assert sorted(builds.read_text().split()) == ["engine", "synth"]
    assert len({worker_of[f"test_{kind}_{n}"] for kind in ("synth", "engine") for n in range(3)}) == 1
    for n in range(3):
        assert worker_of[f"test_plain_{n}_1"] == worker_of[f"test_plain_{n}_2"]
    assert len(set(worker_of.values())) == 2, "both workers ran tests"
