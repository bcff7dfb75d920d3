"""The image service's deployment units, as its dashboard, alarms and ScaledObjects address their metrics."""

from __future__ import annotations

from cdk.accelerators import Accelerator
from cdk.image.workload import deployment_name
from cdk.observability.service_metrics import DeploymentUnit


def image_unit(acc: Accelerator) -> DeploymentUnit:
    """The image service's Deployment on `acc`."""
    return DeploymentUnit(deployment_name(acc), acc)
