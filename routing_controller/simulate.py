"""The three routing modes on one failure, side by side (`python -m tools.routing_simulation` runs it).

A fixed-rate request stream goes to two pools (Neuron and NVIDIA) for 50 minutes; at minute 20 the
Neuron pool loses every node and gets none back for 10 minutes (a Spot reclaim with no capacity
left), then capacity returns. Each pool is scaled like KEDA does it (requests per pod per minute,
scale-down stabilization) and new pods wait for a node and a model load before they are ready.

- `cost`: the fixed cost weights;
- `capacity`: one Service over every pod, so the ALB round-robins over the ready pods;
- `cost-with-failover`: the cost weights moved by `routing_controller.decision.decide`, called every
  controller period, applied by the load balancer controller a few seconds later.

`table` makes the results a Markdown table. The pools and the scenario are arguments: the command that
reads them from cdk.json (tools/routing_simulation.py) sits above the CDK, so this package never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from routing_controller.decision import Hysteresis, PoolObservation, RoutingState, decide

MODES: Final = ("cost", "capacity", "cost-with-failover")


@dataclass(frozen=True)
class PoolSpec:
    """One accelerator pool in the simulation."""

    name: str
    price_per_hour: float
    seconds_per_image: float
    cost_weight: int
    target_per_pod: float  # KEDA's requests per pod per minute
    min_replicas: int
    max_replicas: int
    node_s: float  # from a pending pod to a node that can take it
    load_s: float  # model load until the pod is ready


@dataclass(frozen=True)
class Scenario:
    """The request stream, the outage and how the platform reacts."""

    rate_per_min: float = 100.0
    duration_s: int = 50 * 60
    outage_pool: str = "neuron"
    outage_start_s: int = 20 * 60
    outage_s: int = 10 * 60
    healthy_window: tuple[int, int] = (5 * 60, 20 * 60)  # both pools at their desired replicas
    keda_polling_s: int = 30
    keda_cooldown_s: int = 300
    controller_period_s: int = 10
    apply_delay_s: int = 5  # load balancer controller reconcile + ELB rule update
    hold_s: int = 120
    band_pods: int = 1


@dataclass
class Pod:
    """One pod: waiting for a node until `node_at`, then loading until `ready_at`."""

    created: float
    node_at: float | None = None
    ready_at: float | None = None

    def ready(self, now: float) -> bool:
        return self.ready_at is not None and now >= self.ready_at


@dataclass
class PoolSim:
    """A pool's pods and its KEDA-style scaler."""

    spec: PoolSpec
    pods: list[Pod] = field(default_factory=list)
    desired: int = 0
    below_since: float | None = None
    received: list[float] = field(default_factory=list)  # requests per second reaching its pods
    instance_seconds: float = 0.0
    served: float = 0.0

    def ready_count(self, now: float) -> int:
        return sum(p.ready(now) for p in self.pods)

    def observation(self, now: float) -> PoolObservation:
        ready = self.ready_count(now)
        waiting = sum(1 for p in self.pods if p.node_at is None)
        return PoolObservation(self.desired, ready, pending=len(self.pods) - ready, launching_nodes=waiting)


@dataclass(frozen=True)
class Result:
    """What one mode did over the run."""

    mode: str
    to_empty_percent: float
    failed_percent: float
    cost_healthy: float
    cost_run: float
    weight_changes: int


def simulate(mode: str, pools: tuple[PoolSpec, ...], scenario: Scenario) -> Result:
    """Run one routing mode through the scenario, one-second steps, deterministic."""
    sims = {p.name: PoolSim(p) for p in pools}
    cost_weights = {p.name: p.cost_weight for p in pools}
    rate = scenario.rate_per_min / 60.0
    # Start in steady state: each pool at the replicas its cost share needs, all ready.
    for sim in sims.values():
        share = cost_weights[sim.spec.name] / sum(cost_weights.values()) if mode != "capacity" else 1 / len(pools)
        sim.desired = _keda_desired(sim.spec, rate * 60 * share)
        sim.pods = [Pod(created=-1e9, node_at=-1e9, ready_at=-1e9) for _ in range(sim.desired)]
    weights: dict[str, int] = dict(cost_weights)
    pending_weights: list[tuple[float, dict[str, int]]] = []
    state: RoutingState | None = None
    hysteresis = Hysteresis(scenario.hold_s, scenario.band_pods)
    total = to_empty = failed = 0.0
    healthy_cost = healthy_served = 0.0
    changes = 0
    outage_end = scenario.outage_start_s + scenario.outage_s
    for now in range(scenario.duration_s):
        in_outage = scenario.outage_start_s <= now < outage_end
        if now == scenario.outage_start_s:
            sims[scenario.outage_pool].pods.clear()  # every node reclaimed at once
        # Karpenter: a waiting pod gets a node unless its pool has no capacity.
        for name, sim in sims.items():
            for pod in sim.pods:
                if pod.node_at is None and not (in_outage and name == scenario.outage_pool):
                    pod.node_at = now + sim.spec.node_s
                    pod.ready_at = pod.node_at + sim.spec.load_s
            sim.instance_seconds += sum(1 for p in sim.pods if p.node_at is not None)
        # Routing.
        if mode == "cost-with-failover" and now % scenario.controller_period_s == 0:
            decision = decide(
                cost_weights, {n: s.observation(now) for n, s in sims.items()}, state, float(now), hysteresis
            )
            state = decision.state
            pending_weights.append((now + scenario.apply_delay_s, decision.weights))
        while pending_weights and pending_weights[0][0] <= now:
            new = pending_weights.pop(0)[1]
            changes += new != weights
            weights = new
        if mode == "capacity":
            shares = _shares({n: float(s.ready_count(now)) for n, s in sims.items()})
        else:
            shares = _shares({n: float(w) for n, w in weights.items()})
        # Requests: to a pool with no ready pod they fail; beyond the ready pods' capacity they fail too.
        for name, sim in sims.items():
            sent = rate * shares.get(name, 0.0)
            total += sent
            ready = sim.ready_count(now)
            if ready == 0:
                to_empty += sent
                failed += sent
                sim.received.append(0.0)
                continue
            capacity = ready / sim.spec.seconds_per_image
            served = min(sent, capacity)
            failed += sent - served
            sim.served += served
            sim.received.append(sent)
            if scenario.healthy_window[0] <= now < scenario.healthy_window[1]:
                healthy_served += served
        if sum(shares.values()) == 0:
            total += rate
            failed += rate
        if scenario.healthy_window[0] <= now < scenario.healthy_window[1]:
            healthy_cost += sum(
                sum(1 for p in s.pods if p.node_at is not None) * s.spec.price_per_hour / 3600 for s in sims.values()
            )
        # KEDA.
        if now % scenario.keda_polling_s == 0:
            for sim in sims.values():
                _scale(sim, now, scenario)
    run_cost = sum(s.instance_seconds * s.spec.price_per_hour / 3600 for s in sims.values())
    served = sum(s.served for s in sims.values())
    return Result(
        mode=mode,
        to_empty_percent=100 * to_empty / total,
        failed_percent=100 * failed / total,
        cost_healthy=1000 * healthy_cost / healthy_served,
        cost_run=1000 * run_cost / served,
        weight_changes=changes,
    )


def _shares(raw: Mapping[str, float]) -> dict[str, float]:
    norm = sum(raw.values())
    return {n: v / norm for n, v in raw.items()} if norm > 0 else {}


def _keda_desired(spec: PoolSpec, per_minute: float) -> int:
    return max(spec.min_replicas, min(spec.max_replicas, math.ceil(per_minute / spec.target_per_pod - 1e-9)))


def _scale(sim: PoolSim, now: float, scenario: Scenario) -> None:
    """KEDA/HPA: up at once, down only after the stabilization window; pods follow `desired`."""
    window = sim.received[-60:]
    wanted = _keda_desired(sim.spec, sum(window) * 60 / max(len(window), 1))
    if wanted > sim.desired:
        sim.desired, sim.below_since = wanted, None
    elif wanted < sim.desired:
        sim.below_since = now if sim.below_since is None else sim.below_since
        if now - sim.below_since >= scenario.keda_cooldown_s:
            sim.desired, sim.below_since = wanted, None
    else:
        sim.below_since = None
    while len(sim.pods) < sim.desired:
        sim.pods.append(Pod(created=now))
    while len(sim.pods) > sim.desired:
        sim.pods.pop()  # the newest first


def table(results: list[Result], pools: tuple[PoolSpec, ...], scenario: Scenario) -> str:
    """The Markdown table with a line saying what was simulated."""
    names = ", ".join(f"{p.name} {p.cost_weight}" for p in pools)
    minutes, start, outage = scenario.duration_s // 60, scenario.outage_start_s // 60, scenario.outage_s // 60
    lines = [
        f"{scenario.rate_per_min:g} images/min for {minutes} min; `{scenario.outage_pool}` loses every node at "
        f"minute {start} and gets none for {outage} min. Cost weights: {names}. Controller period "
        f"{scenario.controller_period_s} s, hold {scenario.hold_s} s, band {scenario.band_pods} pod; "
        f"the load balancer controller applies a change {scenario.apply_delay_s} s later.",
        "",
        "| mode | requests sent to a pool with no ready pod | requests failed (no pod or over capacity) "
        "| USD / 1,000 images, healthy (min 5-20) | USD / 1,000 images, whole run | weight changes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| `{r.mode}` | {r.to_empty_percent:.2f} % | {r.failed_percent:.2f} % | {r.cost_healthy:.3f} "
            f"| {r.cost_run:.3f} | {r.weight_changes} |"
        )
    return "\n".join(lines)
