"""What each image model preset costs (cdk/image/presets.py): its pod's instance per hour at rest, and per 1,000 images
at full use, per accelerator; the table docs/serving.md quotes (`python -m cdk.costs`, through cdk/composition.py)."""

from __future__ import annotations

from collections.abc import Iterable

from cdk.image.presets import PRESETS, ImagePreset, PodSize

IMAGES: int = 1000
SECONDS_PER_HOUR: float = 3600.0


def usd_per_1000_images(pod: PodSize) -> float:
    """A busy pod's cost of 1,000 images: its instance's price for the seconds they take (one pod per instance)."""
    return pod.instance.usd_per_hour * pod.seconds_per_image * IMAGES / SECONDS_PER_HOUR


def preset_rows(presets: Iterable[ImagePreset]) -> list[str]:
    """One markdown row per preset and accelerator."""
    rows = []
    for preset in presets:
        for accelerator, pod in (("Neuron", preset.neuron), ("NVIDIA", preset.nvidia)):
            if pod is None:
                continue  # not served on that accelerator
            rows.append(
                f"| `{preset.name}` | {accelerator} | {pod.instance.name} | ${pod.instance.usd_per_hour:.2f} | "
                f"{pod.seconds_per_image:g} | ${usd_per_1000_images(pod):.2f} |"
            )
    return rows


def preset_table() -> str:
    """The image model presets' cost table (on-demand, us-east-1; Spot costs less)."""
    head = (
        "| imageModel | accelerator | instance per pod | per hour at rest (one pod) | seconds per image | "
        "per 1,000 images |\n| --- | --- | --- | --- | --- | --- |"
    )
    return "\n".join([head, *preset_rows(PRESETS.values())])
