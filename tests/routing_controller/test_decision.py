"""The routing decision on the issue's cases: a pool that never gets a node, one that flaps, one short
of its desired replicas, recovery, never all zero, and hysteresis."""

from __future__ import annotations

import random

import pytest

from routing_controller.decision import (
    WEIGHT_TOTAL,
    Decision,
    Hysteresis,
    PoolObservation,
    decide,
    normalize,
)

COST = {"neuron": 65, "nvidia": 35}
HOLD = Hysteresis(hold_s=120, band_pods=1)
PERIOD = 10


def healthy(desired: int = 2) -> PoolObservation:
    return PoolObservation(desired=desired, ready=desired)


def run(timeline, start: Decision | None = None, t0: float = 0.0, period: float = PERIOD):
    """Feed (duration_s, {pool: observation}) segments through `decide` every `period`; return the decisions."""
    decisions = []
    state = start.state if start else None
    now = t0
    for duration, observed in timeline:
        end = now + duration
        while now < end:
            decision = decide(COST, observed, state, now, HOLD)
            decisions.append((now, decision))
            state = decision.state
            now += period
    return decisions


def test_every_pool_at_its_desired_replicas_gets_the_cost_weights():
    decision = decide(COST, {"neuron": healthy(3), "nvidia": healthy(1)}, None, 0.0, HOLD)
    assert decision.weights == COST
    assert sum(decision.weights.values()) == WEIGHT_TOTAL


def test_a_pool_that_never_gets_a_node_gets_no_traffic():
    starving = PoolObservation(1, 0, pending=1, launching_nodes=1, capacity_problem="InsufficientCapacity")
    decisions = run([(1800, {"neuron": starving, "nvidia": healthy(1)})])
    assert all(d.weights == {"neuron": 0, "nvidia": 100} for _, d in decisions)
    # Said once, at the start, with the reason the node does not come.
    (first_reasons,) = [d.reasons for _, d in decisions if d.changed]
    assert any("InsufficientCapacity" in r and "neuron" in r for r in first_reasons)


def test_losing_every_pod_moves_the_weight_at_once():
    decisions = run(
        [
            (60, {"neuron": healthy(2), "nvidia": healthy(1)}),
            (60, {"neuron": PoolObservation(2, 0, pending=2), "nvidia": healthy(1)}),
        ]
    )
    lost_at = 60
    after = [d for t, d in decisions if t >= lost_at]
    assert after[0].weights == {"neuron": 0, "nvidia": 100}
    assert "no ready pod" in after[0].reasons[0]


def test_a_pool_that_flaps_stays_out_instead_of_flapping_the_alb():
    up, down = healthy(1), PoolObservation(1, 0, pending=1)
    timeline = [(60, {"neuron": up, "nvidia": healthy(1)})]
    for _ in range(10):  # ready for 60 s, gone for 30 s, for 15 minutes: each spell is shorter than the hold
        timeline += [(30, {"neuron": down, "nvidia": healthy(1)}), (60, {"neuron": up, "nvidia": healthy(1)})]
    decisions = run(timeline)
    flapping = [d for t, d in decisions if t >= 60]
    assert {d.weights["neuron"] for d in flapping} == {0}
    assert sum(d.changed for d in flapping) == 1  # one cut, no way back while it flaps
    # Once it stays up for the hold time it gets its cost weight back.
    settled = run([(HOLD.hold_s + 2 * PERIOD, {"neuron": up, "nvidia": healthy(1)})], start=flapping[-1], t0=961)
    assert settled[-1][1].weights == COST


def test_short_of_desired_gets_the_share_it_can_serve():
    start = decide(COST, {"neuron": healthy(4), "nvidia": healthy(2)}, None, 0.0, HOLD)
    # KEDA wants 4 Neuron pods; Spot took 2 of them and the replacements wait for a node.
    short = PoolObservation(desired=4, ready=2, pending=2, launching_nodes=2)
    decision = decide(COST, {"neuron": short, "nvidia": healthy(2)}, start.state, 10.0, HOLD)
    # 65 x 2/4 = 32.5 against 35: 48 / 52.
    assert decision.weights == {"neuron": 48, "nvidia": 52}
    assert "short of desired" in decision.reasons[0]


def test_a_single_pod_restart_does_not_move_the_weights():
    start = decide(COST, {"neuron": healthy(4), "nvidia": healthy(2)}, None, 0.0, HOLD)
    restarting = PoolObservation(desired=4, ready=3, pending=1)
    decisions = run(
        [
            (60, {"neuron": restarting, "nvidia": healthy(2)}),
            (60, {"neuron": healthy(4), "nvidia": healthy(2)}),
        ],
        start=start,
        t0=10,
    )
    assert all(d.weights == COST and not d.changed for _, d in decisions)


def test_a_small_shortfall_that_lasts_is_applied_after_the_hold():
    start = decide(COST, {"neuron": healthy(4), "nvidia": healthy(2)}, None, 0.0, HOLD)
    decisions = run([(300, {"neuron": PoolObservation(4, 3, pending=1), "nvidia": healthy(2)})], start=start, t0=10)
    changed = [(t, d) for t, d in decisions if d.changed]
    assert len(changed) == 1
    t, decision = changed[0]
    assert t - 10 >= HOLD.hold_s
    assert decision.weights == normalize({"neuron": 65 * 0.75, "nvidia": 35})


def test_recovery_goes_back_to_cost_after_the_hold():
    out = PoolObservation(2, 0, pending=2)
    decisions = run(
        [
            (60, {"neuron": healthy(2), "nvidia": healthy(2)}),
            (600, {"neuron": out, "nvidia": healthy(2)}),
            (60, {"neuron": PoolObservation(2, 1, pending=1), "nvidia": healthy(2)}),
            (300, {"neuron": healthy(2), "nvidia": healthy(2)}),
        ]
    )
    weights = [(t, d.weights["neuron"]) for t, d in decisions]
    recovered_at = 660
    # Half the pods back at 660 s and all at 720 s: no weight until the share held for 120 s.
    assert all(w == 0 for t, w in weights if 60 <= t < recovered_at + HOLD.hold_s)
    assert weights[-1][1] == COST["neuron"]
    first_back = min(t for t, w in weights if t >= recovered_at and w > 0)
    assert recovered_at + HOLD.hold_s <= first_back <= recovered_at + HOLD.hold_s + 2 * PERIOD


def test_never_all_zero():
    nothing = PoolObservation(1, 0, pending=1)
    # From the start with nothing ready: the cost weights, so the first pods back get traffic.
    first = decide(COST, {"neuron": nothing, "nvidia": nothing}, None, 0.0, HOLD)
    assert first.weights == COST
    # After a failover to nvidia, nvidia dies too: the last weights stay.
    failed_over = run([(30, {"neuron": nothing, "nvidia": healthy(1)})])[-1][1]
    both_gone = decide(COST, {"neuron": nothing, "nvidia": nothing}, failed_over.state, 40.0, HOLD)
    assert both_gone.weights == {"neuron": 0, "nvidia": 100}
    assert "keeping the last weights" in both_gone.reasons[-1]


def test_a_pool_with_cost_weight_zero_serves_when_it_is_the_only_one_with_pods():
    cost = {"neuron": 0, "nvidia": 100}  # routingWeightNeuron=0: Neuron only as a standby
    start = decide(cost, {"neuron": healthy(1), "nvidia": healthy(1)}, None, 0.0, HOLD)
    assert start.weights == cost
    failed = decide(cost, {"neuron": healthy(1), "nvidia": PoolObservation(1, 0, 1)}, start.state, 10.0, HOLD)
    assert failed.weights == {"neuron": 100, "nvidia": 0}
    assert "cost weight 0" in failed.reasons[-1]


def test_the_first_pool_back_when_none_serves_gets_traffic_at_once():
    nothing = PoolObservation(1, 0, pending=1)
    gone = run([(30, {"neuron": nothing, "nvidia": nothing})])[-1][1]
    back = decide(COST, {"neuron": healthy(1), "nvidia": nothing}, gone.state, 40.0, HOLD)
    assert back.weights == {"neuron": 100, "nvidia": 0}
    assert "no other accelerator serves" in back.reasons[0]


def test_random_cluster_histories_keep_the_invariants():
    rng = random.Random(20261122)  # noqa: S311 - a reproducible history, not a secret
    state = None
    for step in range(3000):
        observed = {}
        for name in COST:
            desired = rng.randint(0, 4)
            ready = rng.randint(0, desired + 1)
            observed[name] = PoolObservation(desired, ready, pending=max(0, desired - ready))
        decision = decide(COST, observed, state, step * 7.0, HOLD)
        weights = decision.weights
        assert sum(weights.values()) == WEIGHT_TOTAL
        assert all(0 <= w <= WEIGHT_TOTAL for w in weights.values())
        serving = [n for n, o in observed.items() if o.ready > 0]
        if serving:
            # Traffic never goes to a pool without a ready pod while another has one.
            assert all(weights[n] == 0 for n, o in observed.items() if o.ready == 0)
        state = decision.state


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"a": 65 * 0.5, "b": 35.0}, {"a": 48, "b": 52}),
        ({"a": 999.0, "b": 0.001}, {"a": 99, "b": 1}),  # a pool with capacity never rounds to 0
        ({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 34, "b": 33, "c": 33}),
        ({"a": 0.0, "b": 3.0}, {"a": 0, "b": 100}),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_mismatched_pools_are_an_error():
    with pytest.raises(ValueError, match="differ"):
        decide(COST, {"neuron": healthy()}, None, 0.0, HOLD)
