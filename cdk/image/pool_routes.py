"""The image routes to a subset of the image pools, beside `/` to all of them. Pure functions, no CDK.

The ALB routes by path and header, never by body, so:

- `POST /v1/images/edits` (an Exact path) goes only to the pools that run edits (`workload.serves_edits`), by
  an action of its own (`sd-edits`) over their Services: in the cost modes their cost weights renormalized, in
  capacity mode equal shares. The rule exists only when some routed pools edit and some do not.
- A request whose body is what matters (an adapter the Neuron pool did not fuse, an edit through `/v1/generate`
  or `/v1/jobs`) names its pool with the header `X-Image-Pool: <accelerator>`: `sd-pool-<accelerator>` forwards
  `/` with that header to that pool's Service alone. The rules exist only with more than one routed pool.

These actions are fixed at deploy time: the routing controller moves `weighted` only (its admission guard lets
it change nothing else). A pool route's pools are the only ones that can serve it, so there is nowhere to fail
over to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from cdk.accelerators import Accelerator
from cdk.front_door.routes import PoolRoute
from cdk.image import workload
from common.image_api_paths import IMAGES_EDITS_PATH
from routing_controller.decision import WEIGHT_TOTAL, normalize

EDITS_ACTION: Final = "sd-edits"
# The request header a client sets to pick the image pool of a request (docs/api.md).
POOL_HEADER: Final = "X-Image-Pool"


def pin_action(acc: Accelerator) -> str:
    """The action that forwards requests pinned to `acc`'s pool (and the name of their header condition)."""
    return f"sd-pool-{acc.name}"


def subset_weights(services: Sequence[str], weights: Mapping[str, int] | None) -> dict[str, int]:
    """Forward weights over `services`, summing to WEIGHT_TOTAL: their cost weights renormalized (cost modes), or
    equal shares (capacity mode, `weights` None, or a subset of standbys whose weights are all 0)."""
    raw = {s: float(weights[s]) for s in services} if weights is not None else {}
    if sum(raw.values()) <= 0:
        raw = {s: 1.0 for s in services}
    return normalize(raw, WEIGHT_TOTAL)


def pool_routes(
    routed: Sequence[Accelerator], weights: Mapping[str, int] | None, all_paths: tuple[str, ...]
) -> tuple[PoolRoute, ...]:
    """The edits route and the pinned routes (over `all_paths`, the workload's own) for the `routed` accelerators
    (those the ALB sends requests to); `weights`: Service -> cost weight (cost modes), None in capacity mode."""
    if len(routed) < 2:
        return ()
    routes: list[PoolRoute] = []
    editing = [workload.deployment_name(a) for a in routed if workload.serves_edits(a)]
    if 0 < len(editing) < len(routed):
        routes.append(PoolRoute(EDITS_ACTION, (IMAGES_EDITS_PATH,), "Exact", subset_weights(editing, weights)))
    routes += [
        PoolRoute(
            pin_action(a),
            all_paths,
            "Prefix",
            {workload.deployment_name(a): WEIGHT_TOTAL},
            header=(POOL_HEADER, a.name),
        )
        for a in routed
    ]
    return tuple(routes)
