"""NVIDIA device plugin: advertises nvidia.com/gpu on our GPU nodes."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk import versions
from cdk.accelerators import NODE_LABEL_KEY, NVIDIA


def values() -> dict[str, Any]:
    """Chart values: run only on nodes labelled accelerator=nvidia, tolerating their taint."""
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": NODE_LABEL_KEY, "operator": "In", "values": [NVIDIA.name]}]}
                    ]
                }
            }
        },
        "tolerations": [NVIDIA.toleration],
        # The AL2023 NVIDIA AMI has the driver and container toolkit; no GPU feature discovery needed.
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
    }


def nvidia_device_plugin(scope: Construct, construct_id: str, *, cluster: eks.ICluster) -> eks.HelmChart:
    """Install the pinned device plugin chart."""
    return eks.HelmChart(
        scope,
        construct_id,
        cluster=cluster,
        chart="nvidia-device-plugin",
        repository=versions.NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY,
        version=versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
        release="nvidia-device-plugin",
        namespace="kube-system",
        values=values(),
    )
