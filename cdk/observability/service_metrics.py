"""The service's CloudWatch metrics as the stacks address them: names from common/metric_names.py.

Dashboards, alarms and KEDA triggers all take their namespace, metric names and dimensions from
here, and this module takes them from the service's own contract module, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk.accelerators import Accelerator
from common import metric_names as m


@dataclass(frozen=True)
class DeploymentUnit:
    """A Deployment whose pods publish the platform's metrics (every workload's pods publish the same way).

    `name` is its DeploymentUnit dimension, which is also its Deployment's and Service's name.
    """

    name: str
    accelerator: Accelerator

    @property
    def dimensions(self) -> dict[str, str]:
        """The dimensions its pods publish with.

        The Accelerator value is the hardware's name whatever the workload: every workload's pods publish it,
        so the workloads on one accelerator agree.
        """
        return {
            m.DIMENSION_DEPLOYMENT_UNIT: self.name,
            m.DIMENSION_ACCELERATOR: m.accelerator_dimension(self.accelerator.service_backend),
        }


NAMESPACE = m.NAMESPACE
REQUESTS = m.REQUESTS.name
ERRORS = m.ERRORS.name
LATENCY = m.LATENCY.name
QUEUE_DEPTH = m.QUEUE_DEPTH.name
BATCH_SIZE = m.BATCH_SIZE.name
IMAGES_GENERATED = m.IMAGES_GENERATED.name
ROUTING_WEIGHT = m.ROUTING_WEIGHT.name  # published by the routing controller, same dimensions
JOBS_SUCCEEDED = m.JOBS_SUCCEEDED.name
JOBS_FAILED = m.JOBS_FAILED.name
