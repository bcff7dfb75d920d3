"""The image model families the deploy knows, and the facts of each that the synth checks a preset against.

The service's side of a family (pipeline classes, sizes, defaults, bounds) is app/models/families.py, which the
CDK app may not import (tests/test_import_layers.py); the names here and there are held equal by
tests/cdk/test_architecture_recipes.py. `imageModelFamily` (cdk/config/serving.py) and every preset
(cdk/image/presets.py) must name one of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class ImageFamily:
    """One family as the deploy sees it."""

    name: str  # app/models/families.py `Family.name`: sd, sdxl, flux
    # The least Neuron device memory one compiled size of its pipeline takes: the lower ends of the table in
    # docs/serving.md "Several sizes per Neuron pod" (reasoned from parameter counts and optimum-neuron 0.4.5's
    # loader; the first deploy measures them). A lower bound, so the check stops only what cannot fit.
    neuron_gb_per_size_at_least: float


# Mutable on purpose: a family is added by registering it here (the recipe test does so).
FAMILIES: Final[dict[str, ImageFamily]] = {
    f.name: f for f in (ImageFamily("sd", 4.3), ImageFamily("sdxl", 12.3), ImageFamily("flux", 34.0))
}
