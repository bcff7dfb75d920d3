"""Neuron Helm chart: device plugin (aws.amazon.com/neuron*) and the Neuron scheduler extension.

The scheduler extension is needed as soon as a pod asks for more than one Neuron core or device:
without it the default scheduler may hand out cores that are not adjacent on the device.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk import versions
from cdk.accelerators import NEURON
from cdk.constructs.cluster import SYSTEM_NODE_LABEL


def values() -> dict[str, Any]:
    """Chart values: device plugin on our Neuron nodes; the scheduler extension on system nodes."""
    return {
        "devicePlugin": {
            # The chart's own affinity already limits it to Neuron instance types; the selector
            # keeps it to the nodes our pools label.
            "nodeSelector": NEURON.node_label,
            "tolerations": [NEURON.toleration],
        },
        "scheduler": {
            "enabled": True,
            "nodeSelector": dict(SYSTEM_NODE_LABEL),
            # The second scheduler (`my-scheduler`) that Neuron pods name in schedulerName.
            "customScheduler": {"enabled": True, "nodeSelector": dict(SYSTEM_NODE_LABEL)},
        },
        # The node problem detector's recovery needs extra IAM; CloudWatch covers node health here.
        "npd": {"enabled": False},
    }


def neuron_chart(scope: Construct, construct_id: str, *, cluster: eks.ICluster) -> eks.HelmChart:
    """Install the pinned Neuron chart."""
    return eks.HelmChart(
        scope,
        construct_id,
        cluster=cluster,
        chart="neuron-helm-chart",
        repository=versions.NEURON_CHART_REPOSITORY,
        version=versions.NEURON_CHART_VERSION,
        release="neuron",
        namespace="kube-system",
        values=values(),
    )
