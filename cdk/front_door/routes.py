"""A workload's share of the front door: its paths on the one Ingress, and where they go.

In the cost modes a workload's paths go to a weighted forward action of its own (the LBC's
`alb.ingress.kubernetes.io/actions.<action>` annotation) over its per-accelerator Services; in `capacity`
mode to one Service over all its pods. The routing controller moves an action's weights (one instance per
action), and the WAF relaxes its body rules on the paths whose bodies are prompts.

A workload whose pools do not all serve the same requests adds `PoolRoute`s: extra paths (and, for what a path
cannot tell, an HTTP header the client sets) forwarded to a subset of its pools by an action of their own. The
ALB matches paths, headers and query strings, never bodies; a pool route's action is fixed at deploy time (no
routing controller moves it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from cdk.serving.routing import SERVICE_PORT, weighted_action_annotation

PathType = Literal["Exact", "Prefix"]
# The LBC's routing conditions on an action's rules, beside its path: `conditions.<name>`, where the name is the
# path's backend (an action with port `use-annotation`). Verified: kubernetes-sigs/aws-load-balancer-controller
# v3.2.2 docs/guide/ingress/annotations.md ("conditions.${conditions-name}", field `http-header` with
# `httpHeaderConfig.httpHeaderName` and `values`).
CONDITIONS_PREFIX: Final = "alb.ingress.kubernetes.io/conditions."


def _action_backend(action: str) -> dict[str, Any]:
    """An Ingress backend that names an LBC action (its annotation says where it forwards)."""
    return {"service": {"name": action, "port": {"name": "use-annotation"}}}


@dataclass(frozen=True)
class PoolRoute:
    """Paths of a workload that go to a subset of its pools, by a forward action of their own.

    `weights`: Service -> weight over the subset. `header`: (name, value): only requests carrying that header
    take the route (an ALB http-header condition); others fall through to the workload's other paths.
    """

    action: str  # its LBC action name, unique on the Ingress (and its conditions' name)
    paths: tuple[str, ...]
    path_type: PathType
    weights: Mapping[str, int]
    header: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.paths or not self.weights:
            raise ValueError(f"pool route {self.action}: give its paths and the Services it forwards to")

    def annotations(self) -> dict[str, str]:
        """Its forward action and, with a header, the condition on its rules."""
        key, value = weighted_action_annotation(self.action, self.weights)
        result = {key: value}
        if self.header is not None:
            name, expected = self.header
            condition = [{"field": "http-header", "httpHeaderConfig": {"httpHeaderName": name, "values": [expected]}}]
            result[CONDITIONS_PREFIX + self.action] = json.dumps(condition, separators=(",", ":"))
        return result

    def ingress_paths(self) -> list[dict[str, Any]]:
        """One Ingress path per route, to its action."""
        backend = _action_backend(self.action)
        return [{"path": path, "pathType": self.path_type, "backend": backend} for path in self.paths]


@dataclass(frozen=True)
class Routes:
    """The paths one workload serves at the front door, and their backend."""

    paths: tuple[str, ...]
    path_type: PathType
    action: str  # the weighted action's name (cost modes): an LBC action name, one per workload
    weights: Mapping[str, int] | None  # Service -> weight (cost modes); None: `capacity_service` takes all
    capacity_service: str | None = None  # capacity mode: one Service over every pod of the workload
    prompt_paths: tuple[str, ...] = ()  # paths whose request bodies are prompts (the WAF's common rules skip them)
    # Prefix paths beside `paths` (a workload of Exact paths that also serves a path with an id in it).
    prefix_paths: tuple[str, ...] = ()
    # Objects applied with the Ingress that its paths target (a capacity Service no other stage applies).
    objects: Sequence[dict[str, Any]] = field(default=())
    # Paths to a subset of its pools; listed before its own paths, so a header route on the same path wins
    # (the LBC keeps the order of equally long Prefix paths).
    pool_routes: tuple[PoolRoute, ...] = ()

    def __post_init__(self) -> None:
        if self.weights is None and self.capacity_service is None:
            raise ValueError(f"routes {self.paths}: give weights (cost modes) or a capacity Service")

    @property
    def actions(self) -> list[str]:
        """The LBC actions it names: its weighted action (cost modes) and its pool routes'."""
        own = [self.action] if self.weights is not None else []
        return own + [route.action for route in self.pool_routes]

    def annotations(self) -> dict[str, str]:
        """The weighted action's annotation (cost modes) and its pool routes' actions and conditions."""
        result: dict[str, str] = {}
        if self.weights is not None:
            key, value = weighted_action_annotation(self.action, self.weights)
            result[key] = value
        for route in self.pool_routes:
            result |= route.annotations()
        return result

    def backend(self) -> dict[str, Any]:
        """The Ingress backend of every path: the weighted action, or the all-pods Service."""
        if self.weights is not None:
            return _action_backend(self.action)
        return {"service": {"name": self.capacity_service, "port": {"number": SERVICE_PORT}}}

    def ingress_paths(self) -> list[dict[str, Any]]:
        """One Ingress path per route: its pool routes' first, then its own."""
        backend = self.backend()
        typed: list[tuple[str, PathType]] = [(path, self.path_type) for path in self.paths]
        typed += [(path, "Prefix") for path in self.prefix_paths]
        own = [{"path": path, "pathType": path_type, "backend": backend} for path, path_type in typed]
        return [p for route in self.pool_routes for p in route.ingress_paths()] + own


def prompt_paths(routes: Sequence[Routes]) -> tuple[str, ...]:
    """Every workload's prompt paths, in order."""
    return tuple(path for r in routes for path in r.prompt_paths)
