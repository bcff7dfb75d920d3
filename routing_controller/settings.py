"""The controller's settings, from environment variables the serving stack sets.

A bad value stops the controller at start with a message naming the variable, never a silent default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from routing_controller.annotation import MAX_WEIGHT

ENV_POOLS: Final = "ROUTING_POOLS"


class SettingsError(ValueError):
    """An environment variable has a value the controller cannot run with."""


@dataclass(frozen=True)
class Pool:
    """One accelerator as the controller sees it: its Deployment, Service, NodePool and cost weight."""

    accelerator: str  # the `Accelerator` metric dimension (neuron, nvidia)
    deployment: str  # its Deployment, also the `DeploymentUnit` metric dimension
    service: str  # its Service, a target group of the weighted action
    node_pool: str  # its Karpenter NodePool (NodeClaims carry karpenter.sh/nodepool=<name>)
    cost_weight: int


@dataclass(frozen=True)
class Settings:
    """Everything the loop needs."""

    namespace: str
    ingress: str
    action: str
    service_port: int
    pools: tuple[Pool, ...]
    period_s: float
    hold_s: float
    band_pods: int
    metrics: bool  # publish RoutingWeight to CloudWatch
    instance: str  # this pod's name, the Events' reporting instance

    @property
    def cost_weights(self) -> dict[str, int]:
        """Accelerator -> cost weight."""
        return {p.accelerator: p.cost_weight for p in self.pools}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check ROUTING_* variables."""
        values = os.environ if env is None else env
        return cls(
            namespace=_text(values, "ROUTING_NAMESPACE"),
            ingress=_text(values, "ROUTING_INGRESS"),
            action=_text(values, "ROUTING_ACTION"),
            service_port=int(_number(values, "ROUTING_SERVICE_PORT", 1, 65535)),
            pools=_pools(values),
            period_s=_number(values, "ROUTING_PERIOD_SECONDS", 1, 3600),
            hold_s=_number(values, "ROUTING_HOLD_SECONDS", 0, 86400),
            band_pods=int(_number(values, "ROUTING_BAND_PODS", 0, 100)),
            metrics=_choice(values, "ROUTING_METRICS", ("cloudwatch", "off")) == "cloudwatch",
            instance=values.get("POD_NAME", "") or "routing-controller",
        )


def _text(values: Mapping[str, str], key: str) -> str:
    value = values.get(key, "").strip()
    if not value:
        raise SettingsError(f"{key} is required")
    return value


def _number(values: Mapping[str, str], key: str, minimum: float, maximum: float) -> float:
    raw = _text(values, key)
    try:
        number = float(raw)
    except ValueError:
        raise SettingsError(f"{key}={raw!r} is not a number") from None
    if not minimum <= number <= maximum:
        raise SettingsError(f"{key}={raw} is outside {minimum:g}..{maximum:g}")
    return number


def _choice(values: Mapping[str, str], key: str, allowed: tuple[str, ...]) -> str:
    value = _text(values, key)
    if value not in allowed:
        raise SettingsError(f"{key}={value!r} is not one of {', '.join(allowed)}")
    return value


def _pools(values: Mapping[str, str]) -> tuple[Pool, ...]:
    raw = _text(values, ENV_POOLS)
    try:
        items = json.loads(raw)
        pools = tuple(
            Pool(
                accelerator=str(i["accelerator"]),
                deployment=str(i["deployment"]),
                service=str(i["service"]),
                node_pool=str(i["nodePool"]),
                cost_weight=int(i["costWeight"]),
            )
            for i in items
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SettingsError(
            f"{ENV_POOLS} must be a JSON list of {{accelerator, deployment, service, nodePool, costWeight}}: {exc}"
        ) from None
    if not pools:
        raise SettingsError(f"{ENV_POOLS} names no pool")
    if len({p.accelerator for p in pools}) != len(pools):
        raise SettingsError(f"{ENV_POOLS} names an accelerator twice")
    if any(not 0 <= p.cost_weight <= MAX_WEIGHT for p in pools) or sum(p.cost_weight for p in pools) == 0:
        raise SettingsError(f"{ENV_POOLS}: cost weights must be 0..{MAX_WEIGHT} and not all 0")
    return pools


def pools_env(pools: tuple[Pool, ...]) -> str:
    """The ROUTING_POOLS value for `pools` (what the serving stack writes)."""
    return json.dumps(
        [
            {
                "accelerator": p.accelerator,
                "deployment": p.deployment,
                "service": p.service,
                "nodePool": p.node_pool,
                "costWeight": p.cost_weight,
            }
            for p in pools
        ],
        separators=(",", ":"),
    )
