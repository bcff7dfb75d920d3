"""The service's CloudWatch metrics as the stacks address them: names from app/metric_names.py.

Dashboards, alarms and KEDA triggers all take their namespace, metric names and dimensions from
here, and this module takes them from the service's own contract module, so they cannot drift.
"""

from __future__ import annotations

from app import metric_names as m
from cdk.accelerators import Accelerator


def dimensions(acc: Accelerator) -> dict[str, str]:
    """The dimension set the service publishes with on this accelerator.

    DeploymentUnit is the DEPLOYMENT_UNIT env var the Deployment sets (its own name); Accelerator is
    the backend the service runs there (the BACKEND env var the Deployment sets).
    """
    return {
        m.DIMENSION_DEPLOYMENT_UNIT: acc.deployment_name,
        m.DIMENSION_ACCELERATOR: m.accelerator_dimension(acc.service_backend),
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
