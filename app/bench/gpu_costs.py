"""Cost per 1,000 images on the instance each image preset is pinned to, scaled from the GPU that was measured.

The pinned instance and its on-demand price are the deploy's (cdk/image/presets.py, cdk/instance_types.py). The
image service may not import the CDK app, and the GPU machine has no aws-cdk-lib, so `make bench-gpu-wheels`
(tools/bench_gpu_carry.py) writes them into a small JSON file beside the wheels, which the benchmark reads here.

The figures are measured on an H100 or H200 while the presets run on a g6.xlarge (L4) or a g6e.xlarge (L40S), so
the seconds per image there are an estimate: the measured seconds times the ratio of the two GPUs' dense bf16
tensor-core peaks. Diffusion at these sizes is mostly matrix work, so the ratio is the first-order guess; memory
bandwidth differs by more (an L4 has 300 GB/s against an H200's 4.8 TB/s), so the real figure may be slower.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# Dense (without 2:4 sparsity) bf16 tensor-core peaks in TFLOP/s, NVIDIA's datasheet figures as quoted in
# glennklockwood.com/garden/processors/h100 (H100 SXM5: 989.4; "H200 GPUs are the same as H100 GPUs ... with
# 144 GB of HBM3e") and itkb.uw.cz "NVIDIA H200 vs B300" (H200 SXM dense bf16 ~989); the L40S datasheet table in
# mullet.se (BFLOAT16 Tensor Core 362.05, 733 with sparsity); the L4 datasheet's 242 with sparsity (quoted in
# grokipedia.com "NVIDIA L4 vs L40S"), halved.
DENSE_BF16_TFLOPS: dict[str, float] = {"H100 SXM": 989.4, "H200": 989.4, "L40S": 362.05, "L4": 121.0}
# The GPU of each instance family a preset pins (cdk/image/presets.py: "L4, 24 GB" for g6, "an L40S (48 GB,
# g6e.xlarge)").
INSTANCE_FAMILY_GPU: dict[str, str] = {"g6": "L4", "g6e": "L40S"}


@dataclass(frozen=True)
class PinnedInstance:
    """The instance an image preset's NVIDIA pod is pinned to, and its on-demand price."""

    instance: str
    usd_per_hour: float

    @property
    def gpu(self) -> str | None:
        """The instance's GPU, where INSTANCE_FAMILY_GPU knows its family."""
        return INSTANCE_FAMILY_GPU.get(self.instance.split(".", 1)[0])


@dataclass(frozen=True)
class CostEstimate:
    """Seconds per image and USD per 1,000 images on a pinned instance, scaled from the measured GPU."""

    seconds_per_image: float
    usd_per_1000_images: float


def read_prices(path: Path) -> tuple[dict[str, PinnedInstance], str]:
    """Preset name -> pinned instance, and where the figures came from, from the file `make bench-gpu-wheels` wrote."""
    data = json.loads(path.read_text(encoding="utf-8"))
    presets = {
        name: PinnedInstance(str(entry["instance"]), float(entry["usd_per_hour"]))
        for name, entry in data["presets"].items()
    }
    return presets, str(data["source"])


def gpu_of_device(name: str) -> str | None:
    """The DENSE_BF16_TFLOPS key of a CUDA device name, or None (a PCIe or NVL H100 has other peaks)."""
    if "H200" in name:
        return "H200"
    if "H100" in name and ("SXM" in name or "HBM3" in name):
        return "H100 SXM"
    return None


def estimate(seconds_per_image: float, measured_gpu: str | None, pinned: PinnedInstance) -> CostEstimate | None:
    """The pinned instance's seconds per image and cost, scaled by peak; None when either GPU's peak is unknown."""
    if measured_gpu not in DENSE_BF16_TFLOPS or pinned.gpu not in DENSE_BF16_TFLOPS:
        return None
    seconds = seconds_per_image * DENSE_BF16_TFLOPS[measured_gpu] / DENSE_BF16_TFLOPS[pinned.gpu]
    return CostEstimate(seconds, 1000 * seconds * pinned.usd_per_hour / 3600)
