"""Whether a pod fits the node it is meant for, beside the platform's DaemonSets on that node.

What a pod may request of a node is the node's allocatable CPU and memory less what every DaemonSet there
requests. Karpenter computes allocatable itself before it launches a node (so a pod that does not fit makes
it launch a larger, dearer type than the one priced); `allocatable` below is that computation, in
aws/karpenter-provider-aws@v1.14.1 (bde00654cd31) pkg/providers/instancetype/types.go:
- kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of every core
  above four (`kubeReservedResources`, after amazon-eks-ami's bootstrap.sh, which the v1.14 docs cite in
  website/content/en/docs/concepts/nodeclasses.md "Reserved Resources");
- kube-reserved memory: 11 MiB per pod of the type's pod density plus 255 MiB (the same function);
- hard eviction threshold: 100 MiB of memory (`evictionThreshold`);
- the VM's own overhead: 7.5% of the memory (`--vm-memory-overhead-percent`, default 0.075, in
  website/content/en/docs/reference/settings.md).
The result matches the generated instance-types.md of the same commit (4 vCPU / 16 GiB: 3920m and 14162Mi;
8 vCPU / 32 GiB: 7910m and 29317Mi; inf2.8xlarge: 31850m and 118312Mi); tests/cdk/test_node_fit.py holds it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cdk.instance_types import InstanceType

VM_MEMORY_OVERHEAD: Final = 0.075
EVICTION_MEMORY_MIB: Final = 100
# (first millicore, last millicore, share reserved) of kubeReservedResources.
_CPU_RESERVED_BANDS: Final = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))


@dataclass(frozen=True)
class Requests:
    """CPU (millicores) and memory (MiB) that pods request or a node offers."""

    cpu_m: int
    memory_mib: int

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu_m + other.cpu_m, self.memory_mib + other.memory_mib)


@dataclass(frozen=True)
class DaemonSetRequests:
    """What one DaemonSet's pod requests on every node of an accelerator, and where that was read."""

    name: str
    requests: Requests
    source: str


def allocatable(instance: InstanceType) -> Requests:
    """The CPU and memory Karpenter counts as allocatable on `instance` (its AL2023 defaults, no overrides)."""
    cpu_m = instance.vcpu * 1000
    reserved_m = sum(
        int((min(cpu_m, end) - start) * share) for start, end, share in _CPU_RESERVED_BANDS if cpu_m > start
    )
    memory = instance.memory_mib * (1 - VM_MEMORY_OVERHEAD) - (11 * instance.max_pods + 255) - EVICTION_MEMORY_MIB
    return Requests(cpu_m - reserved_m, math.floor(memory))


_COMMON: Final = (
    # The vpc-cni add-on (cdk/constructs/addons/vpc_cni.py): aws-node requests 25m; its network policy agent
    # and init container request nothing. aws/amazon-vpc-cni-k8s@b52188387 charts/aws-vpc-cni/values.yaml
    # (1.23.1: resources.requests.cpu 25m; init.resources {}, nodeAgent.resources {}).
    DaemonSetRequests("aws-node", Requests(25, 0), "aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml 1.23.1"),
    # EKS's kube-proxy add-on, installed with every cluster: 100m. Read in a dump of the EKS DaemonSet
    # (eks/kube-proxy:v1.28.1-minimal-eksbuild.1, `resources: requests: cpu: 100m`; the project's code search).
    DaemonSetRequests("kube-proxy", Requests(100, 0), "EKS kube-proxy DaemonSet (v1.28.1-eksbuild.1 dump)"),
    # eks-pod-identity-agent: aws/eks-pod-identity-agent@d4dc0f3 charts/eks-pod-identity-agent/values.yaml
    # (chart 1.2.0: `resources: {}`).
    DaemonSetRequests("eks-pod-identity-agent", Requests(0, 0), "aws/eks-pod-identity-agent chart values"),
    # amazon-cloudwatch-observability: the same requests in aws-observability/helm-charts charts/
    # amazon-cloudwatch-observability/values.yaml at d511df7 (5.4.0) and ffea3d4 (6.2.0), either side of the
    # pinned v6.0.1 add-on: agent 250m/128Mi; fluent-bit (containerLogs) 50m/25Mi. Fluent Bit is counted even
    # with containerInsightsContainerLogs=false, so a fit holds whichever way that setting goes.
    DaemonSetRequests("cloudwatch-agent", Requests(250, 128), "amazon-cloudwatch-observability values (agent)"),
    DaemonSetRequests("fluent-bit", Requests(50, 25), "amazon-cloudwatch-observability values (containerLogs)"),
    # node-exporter: nodeExporter.resources.requests 50m/30Mi in the same values.yaml at 9e5b83f3a8b5 (the
    # chart's 6.0.1 release, the pinned add-on's); templates/linux/node-exporter-daemonset.yaml runs it on every
    # non-Fargate Linux node while nodeExporter and otelContainerInsights are enabled, both true by default and
    # left so by our configuration (cdk/constructs/addons/cloudwatch_observability.py sets only containerLogs).
    DaemonSetRequests("node-exporter", Requests(50, 30), "amazon-cloudwatch-observability 6.0.1 values"),
)
DAEMONSETS: Final[dict[str, tuple[DaemonSetRequests, ...]]] = {
    "neuron": (
        *_COMMON,
        # The same values files: neuronMonitor 256m/128Mi (its nodeAffinity lists the Neuron instance types).
        DaemonSetRequests("neuron-monitor", Requests(256, 128), "amazon-cloudwatch-observability values"),
        # aws-neuron/neuron-helm-charts@8172e5e charts/neuron-helm-chart/values.yaml: devicePlugin sets no
        # resources; our values turn npd off (cdk/constructs/addons/neuron.py).
        DaemonSetRequests("neuron-device-plugin", Requests(0, 0), "aws-neuron/neuron-helm-charts values"),
    ),
    "nvidia": (
        *_COMMON,
        # The same values files: dcgmExporter 250m/128Mi (its nodeAffinity lists the GPU instance types).
        DaemonSetRequests("dcgm-exporter", Requests(250, 128), "amazon-cloudwatch-observability values"),
        # NVIDIA/k8s-device-plugin@v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml: `resources: {}`.
        DaemonSetRequests("nvidia-device-plugin", Requests(0, 0), "NVIDIA/k8s-device-plugin v0.20.0 values"),
    ),
}


def daemonset_requests(accelerator: str) -> Requests:
    """What the platform's DaemonSets request on one node of `accelerator`'s pool, together."""
    return sum((d.requests for d in DAEMONSETS[accelerator]), Requests(0, 0))


def _cpu_m(quantity: Any) -> int:
    text = str(quantity)
    return int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)


def _memory_mib(quantity: Any) -> int:
    text = str(quantity)
    for suffix, factor in (("Gi", 1024), ("Mi", 1)):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    raise ValueError(f"memory quantity {text!r}: expected Gi or Mi")


def _container_requests(containers: Iterable[Mapping[str, Any]]) -> list[Requests]:
    out = []
    for container in containers:
        asked = container.get("resources", {}).get("requests", {})
        out.append(Requests(_cpu_m(asked.get("cpu", 0)), _memory_mib(asked["memory"]) if "memory" in asked else 0))
    return out


def pod_requests(pod_spec: Mapping[str, Any]) -> Requests:
    """A pod's effective requests, as the scheduler counts them: the containers' sum, or the largest init
    container's where that is larger (init containers run one at a time, before the others)."""
    running = sum(_container_requests(pod_spec.get("containers", ())), Requests(0, 0))
    init = _container_requests(pod_spec.get("initContainers", ()))
    return Requests(
        max([running.cpu_m, *(r.cpu_m for r in init)]), max([running.memory_mib, *(r.memory_mib for r in init)])
    )


def shortfall(pod: Requests, instance: InstanceType) -> Requests:
    """How much more CPU and memory than `instance` offers one pod and the DaemonSets need (0 where it fits)."""
    room = allocatable(instance)
    need = pod + daemonset_requests(instance.accelerator)
    return Requests(max(0, need.cpu_m - room.cpu_m), max(0, need.memory_mib - room.memory_mib))
