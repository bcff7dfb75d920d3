"""Time to the first image from cold (a pool at zero): the starting gate's "about N minutes" and the README's figure.

Each step's figure comes from a documented source; none is measured here (docs/first-deploy.md's checklist measures
the real one on the first deploy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Step:
    """One step between the first request and the first image, as a range of minutes."""

    name: str
    low_min: float
    high_min: float
    source: str


# The scale-up itself: the gate publishes demand each minute and KEDA polls CloudWatch every scalingPollingSeconds
# (30 s) over the newest complete minute (cdk/serving/scaling.py metricEndTimeOffset): one to three minutes.
DEMAND_TO_REPLICA: Final = Step(
    "demand seen, KEDA asks for a pod", 1, 3, "this stack's flush period (60 s), KEDA polling (30 s) and metric offset"
)
NODE_LAUNCH: Final = Step(
    "Karpenter launches a GPU node and it joins",
    3,
    5,
    "'Pod requiring a new node (via Karpenter): ~5 minutes' (sbhn.g1b.me/item/44053826); the low end is ours",
)
IMAGE_PULL: Final = Step(
    "the service image (PyTorch GPU DLC base, many GB) is pulled",
    2,
    8,
    "'For a 12GB ML image, that's 2-8 minutes of cold-start time' (blog.zmalik.dev, 'Lazy-Pulling Container Images')",
)
REFERENCE_MODEL_GI: Final = 5  # the default preset's weights (SD 2.1-base), which MODEL_LOAD's range is for
MODEL_LOAD: Final = Step(
    "the weights load from S3 and the pipeline warms up",
    1,
    3,
    f"our estimate for {REFERENCE_MODEL_GI} GiB of weights from the model store, scaled with servingModelSizeGi; "
    "no documented figure found",
)


def model_load(size_gi: int) -> Step:
    """MODEL_LOAD for `size_gi` GiB of weights: the download grows with the weights (FLUX.1-schnell's 32 GiB take
    about six times SD 2.1-base's 5), never below the reference's range."""
    factor = max(1.0, size_gi / REFERENCE_MODEL_GI)
    return Step(MODEL_LOAD.name, MODEL_LOAD.low_min * factor, MODEL_LOAD.high_min * factor, MODEL_LOAD.source)


def first_image_minutes(model_size_gi: int = REFERENCE_MODEL_GI) -> tuple[int, int]:
    """(low, high) minutes from the first request on a cold pool to its first image, rounded outwards, for a model of
    `model_size_gi` GiB (servingModelSizeGi)."""
    steps = (DEMAND_TO_REPLICA, NODE_LAUNCH, IMAGE_PULL, model_load(model_size_gi))
    low = sum(s.low_min for s in steps)
    high = sum(s.high_min for s in steps)
    return int(low), int(-(-high // 1))
