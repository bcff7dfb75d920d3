"""What the stacks need to know about each accelerator, in one place.

The node pools (platform) and every workload's pods both read these, so the labels, taints
and resource names that make a pod land on the right node cannot disagree. What runs on an accelerator
(and under which names) is each workload's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

AcceleratorName = Literal["neuron", "nvidia"]

NODE_LABEL_KEY: Final = "accelerator"


@dataclass(frozen=True)
class Accelerator:
    """One kind of accelerated capacity and how Kubernetes sees it."""

    name: AcceleratorName
    resource_name: str  # the extended resource its device plugin advertises
    taint_key: str  # the NoSchedule taint on its nodes
    service_backend: str  # BACKEND the service runs with on it
    compute_unit: str  # what its utilization is measured on, for people: "NeuronCore", "GPU"
    utilization_metric: str  # Container Insights node metric of that utilization

    @property
    def node_label(self) -> dict[str, str]:
        """The label its node pool puts on every node."""
        return {NODE_LABEL_KEY: self.name}

    @property
    def taint(self) -> dict[str, str]:
        """The NoSchedule taint every node of its pool carries, so only its workloads land there."""
        return {"key": self.taint_key, "value": "true", "effect": "NoSchedule"}

    @property
    def toleration(self) -> dict[str, str]:
        """What a pod needs to be scheduled onto its nodes despite the taint."""
        return {"key": self.taint_key, "operator": "Exists", "effect": "NoSchedule"}


NEURON: Final = Accelerator(
    name="neuron",
    resource_name="aws.amazon.com/neuron",
    taint_key="aws.amazon.com/neuron",
    service_backend="neuron",
    compute_unit="NeuronCore",
    utilization_metric="node_neuroncore_utilization",
)
NVIDIA: Final = Accelerator(
    name="nvidia",
    resource_name="nvidia.com/gpu",
    taint_key="nvidia.com/gpu",
    service_backend="cuda",
    compute_unit="GPU",
    utilization_metric="node_gpu_utilization",
)

ACCELERATORS: Final[dict[str, Accelerator]] = {a.name: a for a in (NEURON, NVIDIA)}


def needs_neuron_scheduler(acc: Accelerator, devices: int) -> bool:
    """The Neuron scheduler extension is needed when a pod asks for more than one Neuron device.

    The default scheduler only counts devices; for multi-device requests the extension picks devices
    that are contiguous on the ring. One `aws.amazon.com/neuron` device (with all its cores) needs no
    extension (aws-neuron/aws-neuron-sdk containers/tutorials/k8s-neuron-scheduler.rst).
    """
    return acc.name == "neuron" and devices > 1
