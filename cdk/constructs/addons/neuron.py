"""Neuron Helm chart: the device plugin (aws.amazon.com/neuron), and the scheduler extension only where needed.

Why the extension is usually left out: Neuron's own documentation (aws-neuron/aws-neuron-sdk,
containers/tutorials/k8s-neuron-scheduler.rst) says it "is required for scheduling pods that require
more than one Neuron core or device resource", since only then must the devices be contiguous on the
ring; "requesting one or all Neuron cores or devices is valid" without it. The serving pods and the
compile Job ask for one `aws.amazon.com/neuron` device by default (servingNeuronDevices=1), which the
default scheduler places correctly. The chart's extension also runs its own kube-scheduler, which in
every chart release is older than the cluster (1.1.2 ships v1.28.5; the newest chart README v1.31), so
when a pod does need it (servingNeuronDevices > 1) that scheduler is replaced by the upstream image of
the cluster's own minor (cdk/versions.py).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk import versions
from cdk.accelerators import NEURON
from cdk.constructs.cluster import SYSTEM_NODE_LABEL


def values(*, scheduler_extension: bool) -> dict[str, Any]:
    """Chart values: device plugin on our Neuron nodes; the scheduler extension (on system nodes) only if asked."""
    scheduler: dict[str, Any] = {"enabled": scheduler_extension}
    if scheduler_extension:
        scheduler.update(
            {
                "nodeSelector": dict(SYSTEM_NODE_LABEL),
                # The second scheduler that multi-device pods name in schedulerName, of the cluster's minor.
                "customScheduler": {
                    "enabled": True,
                    "nodeSelector": dict(SYSTEM_NODE_LABEL),
                    "image": {
                        "repository": versions.NEURON_KUBE_SCHEDULER_IMAGE_REPOSITORY,
                        "tag": versions.NEURON_KUBE_SCHEDULER_IMAGE_TAG,
                    },
                },
            }
        )
    return {
        "devicePlugin": {
            # The chart's own affinity already limits it to Neuron instance types; the selector
            # keeps it to the nodes our pools label.
            "nodeSelector": NEURON.node_label,
            "tolerations": [NEURON.toleration],
        },
        "scheduler": scheduler,
        # The node problem detector's recovery needs extra IAM; CloudWatch covers node health here.
        "npd": {"enabled": False},
    }


def neuron_chart(
    scope: Construct, construct_id: str, *, cluster: eks.ICluster, scheduler_extension: bool = False
) -> eks.HelmChart:
    """Install the pinned Neuron chart; `scheduler_extension` when some pod asks for more than one device."""
    return eks.HelmChart(
        scope,
        construct_id,
        cluster=cluster,
        chart="neuron-helm-chart",
        repository=versions.NEURON_CHART_REPOSITORY,
        version=versions.NEURON_CHART_VERSION,
        release="neuron",
        namespace="kube-system",
        values=values(scheduler_extension=scheduler_extension),
    )
