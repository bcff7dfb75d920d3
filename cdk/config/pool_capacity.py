"""Whether each accelerated pool's limit holds its workloads at their maximum replicas, and the room it has left.

Every serving pod is pinned to the instance it is sized for, one pod per node (cdk/serving/pod_fit.py), so a pool
at its maximum runs the sum over its workloads of max replicas x that instance. Karpenter launches a node only
while the new node's capacity fits what the NodePool's `limits.cpu` has left (kubernetes-sigs/karpenter
pkg/controllers/provisioning/scheduling/nodeclaim.go `filterByRemainingResources`: the instance type's Capacity
against the remaining limit); a managed node group stops at `<acc>MaxNodes` nodes. A maximum the limit cannot hold
is never reached, so the synth stops naming the settings. What is left at the maximum decides how a Deployment
rolls: a surge pod needs one more node of its instance (`rolling_update`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cdk.config.context import ConfigError
from cdk.instance_types import InstanceType


@dataclass(frozen=True)
class PoolUse:
    """One workload's Deployment on a pool at its maximum: the settings that size it, for the error."""

    replicas_key: str
    instance_key: str
    instance: InstanceType
    max_replicas: int


@dataclass(frozen=True)
class PoolRoom:
    """What a pool's limit leaves free with every workload at its maximum replicas."""

    vcpu: int  # under `<acc>MaxVcpu` (Karpenter's NodePool limits.cpu)
    nodes: int | None  # under `<acc>MaxNodes`: with managed node groups only, None under Karpenter


def _usage(uses: Iterable[PoolUse]) -> str:
    return " + ".join(
        f"'{u.replicas_key}' = {u.max_replicas} x '{u.instance_key}' = '{u.instance.name}' ({u.instance.vcpu} vCPU)"
        for u in uses
    )


def pool_room(accelerator: str, uses: Iterable[PoolUse], *, max_vcpu: int, max_nodes: int | None) -> PoolRoom:
    """The room `accelerator`'s pool has at its maximum; ConfigError naming the settings when the maxima need more
    vCPU (or, `max_nodes` given, nodes) than its limit holds."""
    listed = list(uses)
    vcpu = sum(u.max_replicas * u.instance.vcpu for u in listed)
    if vcpu > max_vcpu:
        raise ConfigError(
            f"the {accelerator} pool's maximum replicas need {vcpu} vCPU ({_usage(listed)}), more than "
            f"'{accelerator}MaxVcpu' = {max_vcpu} lets Karpenter launch: lower the maximum replicas or raise "
            f"'{accelerator}MaxVcpu' to {vcpu}"
        )
    nodes = sum(u.max_replicas for u in listed)
    if max_nodes is not None and nodes > max_nodes:
        raise ConfigError(
            f"the {accelerator} pool's maximum replicas need {nodes} nodes ({_usage(listed)}), more than "
            f"'{accelerator}MaxNodes' = {max_nodes}: lower the maximum replicas or raise '{accelerator}MaxNodes' "
            f"to {nodes}"
        )
    return PoolRoom(max_vcpu - vcpu, None if max_nodes is None else max_nodes - nodes)


def rolling_update(room: PoolRoom | None, instance: InstanceType) -> dict[str, Any]:
    """A Deployment's rollingUpdate: surge one pod (no capacity lost) where the pool at its maximum still has
    room for one more node of `instance`; else replace in place, one pod down at a time, because a surge pod
    would wait for a node the limit forbids and the rollout would stall until the pool shrinks (a one-replica
    trial pool: until it next scales to zero). `room` None (no platform settings, as in unit tests): surge."""
    fits = room is None or (room.vcpu >= instance.vcpu and (room.nodes is None or room.nodes >= 1))
    return {"maxSurge": 1, "maxUnavailable": 0} if fits else {"maxSurge": 0, "maxUnavailable": 1}


def pool_rooms(
    capacity: Mapping[str, tuple[int, int | None]], uses: Mapping[str, list[PoolUse]]
) -> dict[str, PoolRoom]:
    """Each pool's room: `capacity` maps an accelerator to (max vCPU, max nodes or None), `uses` to its workloads."""
    return {
        name: pool_room(name, uses.get(name, []), max_vcpu=vcpu, max_nodes=nodes)
        for name, (vcpu, nodes) in capacity.items()
    }
