"""The simulation: failover keeps traffic off the empty pool at the cost mode's price while healthy."""

from __future__ import annotations

import pytest

from routing_controller import simulate
from tools import routing_simulation as command


@pytest.fixture(scope="module")
def results():
    pools, scenario = command.pools_from_cdk_json()
    return {mode: simulate.simulate(mode, pools, scenario) for mode in simulate.MODES}


def test_fixed_cost_weights_keep_sending_to_the_empty_pool(results):
    # Its cost share of the traffic for the 10-minute outage and the minutes the pods need to come back.
    assert results["cost"].to_empty_percent > 10


def test_failover_sends_almost_nothing_to_an_empty_pool(results):
    assert results["cost-with-failover"].to_empty_percent < 0.5
    assert results["cost-with-failover"].failed_percent < results["cost"].failed_percent / 3


def test_failover_costs_what_cost_mode_costs_while_healthy(results):
    healthy = results["cost-with-failover"].cost_healthy / results["cost"].cost_healthy
    assert healthy == pytest.approx(1.0, abs=0.03)


def test_capacity_mode_never_sends_to_an_empty_pool(results):
    assert results["capacity"].to_empty_percent == 0


def test_the_table_is_written_between_the_markers(tmp_path, results):
    doc = tmp_path / "serving.md"
    doc.write_text(f"# x\n\n{command.BEGIN}\nSTALE-TABLE\n{command.END}\n\nafter\n")
    pools, scenario = command.pools_from_cdk_json()
    command.write_into_doc(simulate.table(list(results.values()), pools, scenario), doc)
    text = doc.read_text()
    assert "STALE-TABLE" not in text and text.endswith("after\n")
    assert "| `cost-with-failover` |" in text


def test_a_doc_without_markers_is_an_error(tmp_path):
    doc = tmp_path / "serving.md"
    doc.write_text("# nothing to replace\n")
    with pytest.raises(SystemExit, match="routing-simulation"):
        command.write_into_doc("table", doc)


def test_the_committed_table_is_current(results):
    pools, scenario = command.pools_from_cdk_json()
    text = simulate.table([results[m] for m in simulate.MODES], pools, scenario)
    assert text in command.DOC.read_text(), "docs/serving.md is stale: run python -m tools.routing_simulation"
