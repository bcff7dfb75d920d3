"""cdk/node_fit.py: Karpenter's allocatable formula, the DaemonSets' requests and a pod's effective requests."""

from __future__ import annotations

import pytest

from cdk.instance_types import INSTANCE_TYPES
from cdk.node_fit import Requests, allocatable, daemonset_requests, pod_requests, shortfall

# What aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/reference/instance-types.md prints as each type's
# allocatable cpu and memory (its generator runs the same computation on the same assumptions: AL2023, defaults).
KARPENTER_DOCS_ALLOCATABLE = {
    "inf2.xlarge": Requests(3920, 14162),
    "inf2.8xlarge": Requests(31850, 118312),
    "g5.xlarge": Requests(3920, 14162),
    "g5.2xlarge": Requests(7910, 29317),
    "g6.xlarge": Requests(3920, 14162),
    "g6.2xlarge": Requests(7910, 29317),
    "g6e.xlarge": Requests(3920, 29317),
    "p5.4xlarge": Requests(15890, 240830),
}


@pytest.mark.parametrize("name", sorted(KARPENTER_DOCS_ALLOCATABLE))
def test_allocatable_is_what_karpenter_documents(name):
    assert allocatable(INSTANCE_TYPES[name]) == KARPENTER_DOCS_ALLOCATABLE[name]


def test_every_accelerator_node_carries_about_seven_tenths_of_a_vcpu_of_daemonsets():
    # The review's figure ("about 0.73 vCPU"), from the add-ons' own values files, node-exporter's 50m/30Mi included.
    assert daemonset_requests("neuron") == Requests(731, 311)
    assert daemonset_requests("nvidia") == Requests(725, 311)


def test_the_largest_init_container_counts_when_it_outweighs_the_containers():
    spec = {
        "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "512Mi"}}}],
        "containers": [
            {"resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}}},
            {"resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
        ],
    }
    assert pod_requests(spec) == Requests(4000, 2304)


def test_the_reviewed_pod_does_not_fit_a_four_vcpu_node():
    # 3,000m of vLLM and 250m of gateway, plus 731m of DaemonSets, is more than 3,920m: Karpenter would launch an
    # inf2.8xlarge for it. This is the shape cdk.json shipped before the presets.
    pod = Requests(3250, 12 * 1024 + 256)
    assert shortfall(pod, INSTANCE_TYPES["inf2.xlarge"]) == Requests(61, 0)
    assert shortfall(pod, INSTANCE_TYPES["inf2.8xlarge"]) == Requests(0, 0)
