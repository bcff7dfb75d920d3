"""What every check reads: the region, the stacks' outputs, AWS clients, kubectl and the front door's token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from verify.kube import Kubectl
from verify.stacks import ADDITIONS, CLUSTER, SERVING


@dataclass
class Context:
    """One run's view of the deployed stack. `clients` builds a boto3 client per service (one each, cached);
    `token` gives a bearer token of the stack's programs' client; `which` finds an optional CLI (helm, docker)."""

    region: str
    outputs: dict[str, dict[str, str]]
    kube: Kubectl
    clients: Callable[[str], Any]
    token: Callable[[], str]
    which: Callable[[str], str | None]
    _cached: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """The boto3 client of `service` in the stack's region."""
        if service not in self._cached:
            self._cached[service] = self.clients(service)
        return self._cached[service]

    def output(self, stack: str, key: str) -> str | None:
        """A stack's output by key, None where the stack does not emit it (a setting turned it off)."""
        return self.outputs.get(stack, {}).get(key)

    @property
    def on_team_cluster(self) -> bool:
        """Deployed into a cluster the team runs (existingClusterName): the additions stack stands for the network
        and cluster stacks."""
        return ADDITIONS in self.outputs and CLUSTER not in self.outputs

    def cluster_name(self) -> str | None:
        """The cluster's name: the cluster stack's output, or on a team's cluster the additions stack's."""
        return self.output(CLUSTER, "ClusterName") or self.output(ADDITIONS, "ClusterName")

    @property
    def service_url(self) -> str:
        """The front door's URL, ending in '/' (the serving stack's ServiceUrl output)."""
        return self.outputs[SERVING]["ServiceUrl"]
