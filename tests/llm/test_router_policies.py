"""`python -m tools.router_policies` end to end, small: the router binary with each policy in front of real gateways
and stand-ins, its section written into a results file, and cache_aware's placement and render calls as measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.bench.results_file import read_section
from tools import router_policies


@pytest.mark.skipif(not router_policies.ROUTER_BIN.exists(), reason="no vllm-router: docs/llm-serving.md")
def test_the_comparison_runs_every_policy_and_writes_its_section(tmp_path: Path):
    results = tmp_path / "benchmarks.md"
    argv = ["--engines=2", "--rounds=1", "--conversations=3", "--sessions=3", "--turns=3", "--output-tokens=4",
            "--ttft-ms=5", "--gap-ms=1", f"--results-file={results}"]  # fmt: skip
    assert router_policies.main(argv) == 0
    text = read_section(results, router_policies.RESULTS_KEY)
    assert text is not None
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    assert set(router_policies.POLICIES) <= set(rows)
    for policy in router_policies.POLICIES:
        assert rows[policy][-1].strip(" |") == "0", rows[policy]  # no errors
    # cache_aware keeps each conversation on one engine and renders each request on both.
    assert rows["cache_aware"][4] == "100%" and rows["cache_aware"][6] == "2.00"
    assert rows["round_robin"][6] == "0.00"
