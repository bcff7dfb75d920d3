"""Which Neuron pods go through the Neuron scheduler extension, and what that extension runs.

The extension's own kube-scheduler once lagged the control plane by eight minors (chart 1.1.2's
v1.28.5 against 1.36); these tests keep single-device pods off it and keep it on the cluster's minor.
"""

from __future__ import annotations

from cdk import versions
from cdk.accelerators import NEURON, NVIDIA, needs_neuron_scheduler
from cdk.config import AppConfig
from cdk.constructs.addons.neuron import values
from cdk.image.workload import scheduling
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT


def _serving(**overrides):
    return AppConfig.from_context({**DEFAULT_CONTEXT, **EXAMPLE_ENVIRONMENT, **overrides}).serving


def test_only_multi_device_neuron_pods_need_the_extension():
    assert not needs_neuron_scheduler(NEURON, 1)
    assert needs_neuron_scheduler(NEURON, 2)
    assert not needs_neuron_scheduler(NVIDIA, 4)


def test_a_multi_device_pod_names_the_extensions_scheduler():
    assert "schedulerName" not in scheduling(NEURON, _serving(servingNeuronDevices=1))
    spec = scheduling(NEURON, _serving(servingNeuronDevices=2))
    assert spec["schedulerName"] == versions.NEURON_SCHEDULER_NAME


def test_without_the_extension_the_chart_runs_no_second_scheduler():
    chart = values(scheduler_extension=False)
    assert chart["scheduler"] == {"enabled": False}
    assert chart["devicePlugin"]["nodeSelector"] == NEURON.node_label


def test_the_extensions_scheduler_is_of_the_clusters_minor():
    custom = values(scheduler_extension=True)["scheduler"]["customScheduler"]
    assert custom["enabled"] is True
    assert custom["image"]["repository"] == versions.NEURON_KUBE_SCHEDULER_IMAGE_REPOSITORY
    assert custom["image"]["tag"].startswith(f"v{versions.KUBERNETES_VERSION}.")
