"""The routing policy: a pure function from what the cluster shows to the ALB's forward weights.

Per accelerator the controller sees how many pods KEDA asked for (the Deployment's replicas), how
many are ready (readiness gates included, so the ALB target is healthy) and how many are pending.
The share it can serve is `ready / desired` (capped at 1), and its weight is its cost weight times
that share, normalized to `total`:

    weight[a] ~ cost_weight[a] * min(1, ready[a] / desired[a])

so with every accelerator at its desired replicas the weights are the cost weights, an accelerator
with no ready pod gets 0, and one that is short gets what it can serve; the others' KEDA scalers see
the extra requests and add pods.

Hysteresis, per accelerator, on the share in effect:
- no ready pod: 0 at once (every request sent there would fail);
- a cut larger than `band_pods` pods: at once (the remaining pods would be overloaded);
- a cut of at most `band_pods` pods (a single pod's restart): only once it has lasted `hold_s`;
- a rise (pods ready again): only once the higher share has held for `hold_s`, so a pool that
  flaps stays at its low share instead of flapping the ALB; when no other accelerator serves,
  a rise is taken at once (there is nothing to protect).
The weights are never all zero: with no ready pod anywhere the last weights (else the cost weights)
stay, so traffic reaches the first pods that come back; and when only accelerators whose cost weight
is 0 (a standby) have ready pods, they serve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

WEIGHT_TOTAL: Final = 100


@dataclass(frozen=True)
class PoolObservation:
    """What the cluster shows for one accelerator at one moment."""

    desired: int  # replicas KEDA asked for (the Deployment's spec.replicas)
    ready: int  # pods Ready, the load balancer's readiness gate included
    pending: int = 0  # pods created but not ready (no node yet, pulling, loading the model)
    launching_nodes: int = 0  # Karpenter NodeClaims for its pool not yet ready
    capacity_problem: str = ""  # the latest reason a NodeClaim could not launch, if any

    @property
    def share(self) -> float:
        """The fraction of its desired load it can serve now, 0..1."""
        if self.ready <= 0:
            return 0.0
        if self.desired <= 0:
            return 1.0
        return min(1.0, self.ready / self.desired)

    def describe(self) -> str:
        """`1/3 ready, 2 pending, 1 node launching (InsufficientCapacity)` for logs and Events."""
        text = f"{self.ready}/{self.desired} ready"
        if self.pending:
            text += f", {self.pending} pending"
        if self.launching_nodes:
            text += f", {self.launching_nodes} node{'s' if self.launching_nodes > 1 else ''} launching"
        if self.capacity_problem:
            text += f" ({self.capacity_problem})"
        return text


@dataclass(frozen=True)
class Hysteresis:
    """How long a rise or a small cut must last, and how many pods count as a small cut."""

    hold_s: float
    band_pods: int = 1

    def __post_init__(self) -> None:
        if self.hold_s < 0 or self.band_pods < 0:
            raise ValueError("hold_s and band_pods must not be negative")


@dataclass(frozen=True)
class PoolState:
    """The share in effect for one accelerator, and a change waiting for its hold time, if any."""

    share: float
    waiting: Literal["cut", "rise"] | None = None  # the direction of the change that waits
    since: float = 0.0  # when the observed share started to differ in that direction


@dataclass(frozen=True)
class RoutingState:
    """What the controller remembers between decisions."""

    pools: Mapping[str, PoolState]
    weights: Mapping[str, int]


@dataclass(frozen=True)
class Decision:
    """The weights to set, the state to remember, and why they changed."""

    weights: dict[str, int]
    state: RoutingState
    reasons: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        """True when a share in effect changed, so the weights may differ from the last ones."""
        return bool(self.reasons)


def normalize(raw: Mapping[str, float], total: int = WEIGHT_TOTAL) -> dict[str, int]:
    """Integer weights summing to `total` in proportion to `raw` (largest remainder, ties by name);
    an accelerator with a positive raw value never rounds down to 0."""
    norm = sum(raw.values())
    if norm <= 0:
        raise ValueError("nothing to normalize: every raw weight is 0")
    exact = {name: total * value / norm for name, value in raw.items()}
    weights = {name: math.floor(value) for name, value in exact.items()}
    for name in sorted(exact, key=lambda n: (-(exact[n] - weights[n]), n))[: total - sum(weights.values())]:
        weights[name] += 1
    for name in sorted(raw):
        if raw[name] > 0 and weights[name] == 0:
            donor = max(weights, key=lambda n: (weights[n], n))
            weights[donor] -= 1
            weights[name] = 1
    return weights


def decide(
    cost_weights: Mapping[str, int],
    observed: Mapping[str, PoolObservation],
    previous: RoutingState | None,
    now: float,
    hysteresis: Hysteresis,
    total: int = WEIGHT_TOTAL,
) -> Decision:
    """The forward weights for `now`, given the cost weights, what each pool shows and the last state."""
    if set(observed) != set(cost_weights):
        raise ValueError(f"observed pools {sorted(observed)} differ from the cost weights' {sorted(cost_weights)}")
    if sum(cost_weights.values()) <= 0:
        raise ValueError("the cost weights are all 0")
    if previous is None:
        pools = {name: PoolState(obs.share) for name, obs in observed.items()}
        reasons = tuple(f"{name}: start at {_share_text(o.share)} ({o.describe()})" for name, o in observed.items())
        return _decision(cost_weights, pools, None, reasons, total)

    pools = dict(previous.pools)
    reasons: list[str] = []
    # Cuts first, so that a rise below knows whether any other accelerator still serves.
    for name, obs in observed.items():
        state = pools.get(name, PoolState(obs.share))
        share = obs.share
        if share >= state.share:
            continue
        cut_pods = (state.share - share) * max(obs.desired, obs.ready, 1)
        if share == 0.0:
            pools[name] = PoolState(0.0)
            reasons.append(f"{name}: no ready pod ({obs.describe()}): weight 0")
        elif cut_pods > hysteresis.band_pods + 1e-9:
            pools[name] = PoolState(share)
            reasons.append(f"{name}: short of desired ({obs.describe()}): {_share_text(share)}")
        else:
            since = state.since if state.waiting == "cut" else now
            if now - since >= hysteresis.hold_s:
                pools[name] = PoolState(share)
                reasons.append(
                    f"{name}: short by {cut_pods:.0f} pod for {now - since:.0f} s ({obs.describe()}): "
                    f"{_share_text(share)}"
                )
            else:
                pools[name] = PoolState(state.share, "cut", since)
    for name, obs in observed.items():
        state = pools.get(name, PoolState(obs.share))
        share = obs.share
        if share <= state.share:
            if share == state.share and state.waiting is not None:
                pools[name] = PoolState(state.share)  # back to what is in effect: nothing waits
            continue
        others_serve = any(p.share > 0 for other, p in pools.items() if other != name)
        since = state.since if state.waiting == "rise" else now
        if not others_serve or now - since >= hysteresis.hold_s:
            pools[name] = PoolState(share)
            held = f" for {now - since:.0f} s" if others_serve else ", no other accelerator serves"
            reasons.append(f"{name}: ready again ({obs.describe()}){held}: {_share_text(share)}")
        else:
            pools[name] = PoolState(state.share, "rise", since)
    return _decision(cost_weights, pools, previous.weights, tuple(reasons), total)


def _share_text(share: float) -> str:
    return "cost weight" if share >= 1.0 else f"{share:.0%} of its cost weight"


def _decision(
    cost_weights: Mapping[str, int],
    pools: Mapping[str, PoolState],
    last_weights: Mapping[str, int] | None,
    reasons: tuple[str, ...],
    total: int,
) -> Decision:
    raw = {name: cost_weights[name] * pools[name].share for name in cost_weights}
    serving = {name: state.share for name, state in pools.items() if state.share > 0}
    if sum(raw.values()) > 0:
        weights = normalize(raw, total)
    elif serving:
        # Only accelerators with a cost weight of 0 have ready pods: serving beats an empty pool.
        weights = normalize({name: serving.get(name, 0.0) for name in cost_weights}, total)
        if reasons:
            reasons = (*reasons, "only accelerators with cost weight 0 have ready pods: serving from them")
    elif last_weights is not None and sum(last_weights.values()) > 0:
        weights = dict(last_weights)
        if reasons:
            reasons = (*reasons, "no accelerator has a ready pod: keeping the last weights")
    else:
        weights = normalize({name: float(w) for name, w in cost_weights.items()}, total)
        reasons = (*reasons, "no accelerator has a ready pod: cost weights until one has")
    return Decision(weights=weights, state=RoutingState(pools=pools, weights=weights), reasons=reasons)
