"""A workload's share of the front door: its paths on the one Ingress, and where they go.

In the cost modes a workload's paths go to a weighted forward action of its own (the LBC's
`alb.ingress.kubernetes.io/actions.<action>` annotation) over its per-accelerator Services; in `capacity`
mode to one Service over all its pods. The routing controller moves an action's weights (one instance per
action), and the WAF relaxes its body rules on the paths whose bodies are prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cdk.serving.routing import SERVICE_PORT, weighted_action_annotation

PathType = Literal["Exact", "Prefix"]


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

    def __post_init__(self) -> None:
        if self.weights is None and self.capacity_service is None:
            raise ValueError(f"routes {self.paths}: give weights (cost modes) or a capacity Service")

    def annotations(self) -> dict[str, str]:
        """The weighted action's annotation, in the cost modes."""
        if self.weights is None:
            return {}
        key, value = weighted_action_annotation(self.action, self.weights)
        return {key: value}

    def backend(self) -> dict[str, Any]:
        """The Ingress backend of every path: the weighted action, or the all-pods Service."""
        if self.weights is not None:
            return {"service": {"name": self.action, "port": {"name": "use-annotation"}}}
        return {"service": {"name": self.capacity_service, "port": {"number": SERVICE_PORT}}}

    def ingress_paths(self) -> list[dict[str, Any]]:
        """One Ingress path per route."""
        backend = self.backend()
        typed: list[tuple[str, PathType]] = [(path, self.path_type) for path in self.paths]
        typed += [(path, "Prefix") for path in self.prefix_paths]
        return [{"path": path, "pathType": path_type, "backend": backend} for path, path_type in typed]


def prompt_paths(routes: Sequence[Routes]) -> tuple[str, ...]:
    """Every workload's prompt paths, in order."""
    return tuple(path for r in routes for path in r.prompt_paths)
