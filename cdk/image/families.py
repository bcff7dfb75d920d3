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

    name: str  # app/models/families.py `Family.name`: sd, sdxl, flux, ...
    # The least one compiled size of its pipeline weighs: on the Neuron devices and, as its `<W>x<H>/` folder of
    # artifacts (weights inlined), on the serving pod's cache volume. The lower ends of the table in
    # docs/serving.md "Several sizes per Neuron pod" (reasoned from parameter counts and optimum-neuron 0.4.5's
    # loader; the first deploy measures them). A lower bound, so the checks stop only what cannot fit. None:
    # optimum-neuron 0.4.5 has no pipeline for the family (its `modeling_diffusion` exports: SD, SDXL, LCM,
    # PixArt, Flux), so it cannot be served on Neuron.
    neuron_gb_per_size_at_least: float | None


# Mutable on purpose: a family is added by registering it here (the recipe test does so).
FAMILIES: Final[dict[str, ImageFamily]] = {
    f.name: f
    for f in (
        ImageFamily("sd", 4.3),
        ImageFamily("sdxl", 12.3),
        ImageFamily("flux", 34.0),
        ImageFamily("flux2-klein", None),
        ImageFamily("z-image", None),
        ImageFamily("qwen-image", None),
    )
}
