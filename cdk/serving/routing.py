"""How the ALB splits a workload's traffic between its per-accelerator Services. Pure functions, no CDK.

`cost` and `cost-with-failover` modes: one weighted forward action across the per-accelerator
Services. Weights come from config, or are derived from each accelerator's cost per image:

    cost_per_image[a] = price_per_hour[a] / 3600 * seconds_per_image[a]
    weight[a]         = round_to_total( (1 / cost_per_image[a]) / sum_b (1 / cost_per_image[b]), 100 )

so the accelerator that makes an image for less money gets proportionally more of the traffic.
In `cost-with-failover` these are the weights the Ingress starts with and the routing controller
(routing_controller/) returns to; it moves weight away from an accelerator without ready capacity.

`capacity` mode: one Service selects the pods of every accelerator, and the ALB round-robins across
all ready pods, so whichever accelerator has capacity serves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk.accelerators import Accelerator
from common.bench.cost import cost_per_1000_images
from routing_controller import annotation
from routing_controller.decision import WEIGHT_TOTAL  # the controller's weights sum to the same total

SERVICE_PORT: Final = 80
CONTAINER_PORT: Final = 8000
PORT_NAME: Final = "http"


@dataclass(frozen=True)
class CostInput:
    """What one accelerator costs: instance price per hour and measured seconds per image."""

    price_per_hour: float
    seconds_per_image: float

    @property
    def cost_per_1000_images(self) -> float:
        """USD per 1,000 images with the instance fully busy (the benchmark's own formula)."""
        return cost_per_1000_images(self.price_per_hour, images_per_minute=60.0 / self.seconds_per_image)

    @property
    def cost_per_image(self) -> float:
        """USD per image with the instance fully busy."""
        return self.cost_per_1000_images / 1000.0


def weights_from_cost(costs: Mapping[str, CostInput], total: int = WEIGHT_TOTAL) -> dict[str, int]:
    """Integer weights summing to `total`, proportional to 1 / cost per image.

    Rounding uses the largest-remainder method so the weights always sum to exactly `total`
    (ties go to the cheaper accelerator, then by name, so the result is stable).
    """
    if not costs:
        raise ValueError("no accelerator to route to")
    inverse = {name: 1.0 / c.cost_per_image for name, c in costs.items()}
    norm = sum(inverse.values())
    exact = {name: total * v / norm for name, v in inverse.items()}
    weights = {name: math.floor(v) for name, v in exact.items()}
    leftover = total - sum(weights.values())
    order = sorted(exact, key=lambda n: (-(exact[n] - weights[n]), costs[n].cost_per_image, n))
    for name in order[:leftover]:
        weights[name] += 1
    return weights


def resolve_weights(
    accelerators: Sequence[Accelerator],
    explicit: Mapping[str, int | None],
    costs: Mapping[str, CostInput],
) -> dict[str, int]:
    """Weights per enabled accelerator: explicit ones when configured, else derived from cost."""
    names = [a.name for a in accelerators]
    given = {n: explicit.get(n) for n in names}
    if all(v is not None for v in given.values()):
        weights = {n: int(v) for n, v in given.items() if v is not None}
        if sum(weights.values()) == 0:
            raise ValueError("routing weights of the enabled accelerators are all 0: no traffic would be served")
        return weights
    return weights_from_cost({n: costs[n] for n in names})


def weighted_forward_action(services_weights: Mapping[str, int]) -> dict[str, Any]:
    """The LBC `actions.<name>` annotation body: forward to each Service's port 80 by weight.

    The same builder the routing controller patches with, so deploy and controller agree.
    """
    return annotation.forward_action(services_weights, SERVICE_PORT)


def weighted_action_annotation(action: str, services_weights: Mapping[str, int]) -> tuple[str, str]:
    """(annotation key, JSON value) for the weighted forward action named `action`."""
    return annotation.annotation_key(action), annotation.encode(services_weights, SERVICE_PORT)
