"""`python -m tools.router_policies` end to end, small: the router binary with each policy in front of real gateways
over stand-ins, and over vLLM's CPU engines; its section written into a results file, and cache_aware's placement,
render calls and (with vLLM) prefix-cache hits as measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.bench.results_file import read_section
from tools import router_policies

NO_ROUTER = "no vllm-router: docs/llm-serving.md"


def table_rows(results: Path, key: str) -> dict[str, list[str]]:
    """The section's table under `key`: policy -> its cells (the header row under 'policy')."""
    text = read_section(results, key)
    assert text is not None, key
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return {row[0]: row for row in cells}


@pytest.mark.skipif(not router_policies.ROUTER_BIN.exists(), reason=NO_ROUTER)
def test_the_comparison_runs_every_policy_and_writes_its_section(tmp_path: Path):
    results = tmp_path / "benchmarks.md"
    argv = ["--engines=2", "--rounds=1", "--conversations=3", "--sessions=3", "--turns=3", "--output-tokens=4",
            "--ttft-ms=5", "--gap-ms=1", f"--results-file={results}"]  # fmt: skip
    assert router_policies.main(argv) == 0
    rows = table_rows(results, router_policies.RESULTS_KEY)
    assert set(router_policies.POLICIES) <= set(rows)
    for policy in router_policies.POLICIES:
        assert rows[policy][-1] == "0", rows[policy]  # no errors
    # cache_aware keeps each conversation on one engine and renders each request on both.
    assert rows["cache_aware"][4] == "100%" and rows["cache_aware"][6] == "2.00"
    assert rows["round_robin"][6] == "0.00"


@pytest.mark.skipif(not router_policies.ROUTER_BIN.exists(), reason=NO_ROUTER)
def test_over_cpu_engines_the_section_has_each_policys_prefix_cache_hit_rate(vllm_env: Path, tmp_path: Path):
    """The smallest CPU run (two engines, two conversations of two turns): the engines' prefix-cache hit rate per
    policy, and cache_aware keeps each second turn on its first turn's engine, where its prefix is cached."""
    results = tmp_path / "benchmarks.md"
    argv = ["--engines-kind=cpu", "--rounds=1", "--conversations=2", "--sessions=2", "--turns=2",
            "--system-words=60", "--turn-words=10", "--output-tokens=2", f"--results-file={results}"]  # fmt: skip
    assert router_policies.main(argv) == 0
    assert read_section(results, router_policies.RESULTS_KEYS["standin"]) is None
    rows = table_rows(results, router_policies.RESULTS_KEYS["cpu"])
    column = rows["policy"].index("prefix-cache hit rate")
    rates = {policy: rows[policy][column] for policy in router_policies.POLICIES}
    assert all(rate.endswith("%") and rate[:-1].isdigit() for rate in rates.values()), rates
    assert int(rates["cache_aware"][:-1]) > 0, rates
    assert rows["cache_aware"][rows["policy"].index("same engine")] == "100%"
    assert all(rows[policy][-1] == "0" for policy in router_policies.POLICIES), rows  # no errors
