"""The service's CloudWatch metrics as the stacks address them: names from common/metric_names.py.

Dashboards, alarms and KEDA triggers all take their namespace, metric names and dimensions from
here, and this module takes them from the service's own contract module, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk.accelerators import Accelerator
from common import metric_names as m


def dimensions(acc: Accelerator) -> dict[str, str]:
    """The dimension set the service publishes with on this accelerator.

    DeploymentUnit is the DEPLOYMENT_UNIT env var the Deployment sets (its own name); Accelerator is
    the backend the service runs there (the BACKEND env var the Deployment sets).
    """
    return DeploymentUnit(acc.deployment_name, acc).dimensions


@dataclass(frozen=True)
class DeploymentUnit:
    """A Deployment whose pods publish the platform's metrics: the image service's or the LLM gateway's.

    `name` is its DeploymentUnit dimension, which is also its Deployment's and Service's name.
    """

    name: str
    accelerator: Accelerator

    @property
    def dimensions(self) -> dict[str, str]:
        """The dimensions its pods publish with.

        The Accelerator value is the hardware's name either way: the image service maps its BACKEND to it
        and the LLM gateway is given it (its ACCELERATOR setting), so both workloads on one accelerator agree.
        """
        return {
            m.DIMENSION_DEPLOYMENT_UNIT: self.name,
            m.DIMENSION_ACCELERATOR: m.accelerator_dimension(self.accelerator.service_backend),
        }


def image_unit(acc: Accelerator) -> DeploymentUnit:
    """The image service's Deployment on `acc`."""
    return DeploymentUnit(acc.deployment_name, acc)


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
# The LLM gateway's own (llm_gateway/metrics_bridge.py says what each means).
PROMPT_TOKENS = m.PROMPT_TOKENS.name
OUTPUT_TOKENS = m.OUTPUT_TOKENS.name
TIME_TO_FIRST_TOKEN = m.TIME_TO_FIRST_TOKEN.name
TIME_PER_OUTPUT_TOKEN = m.TIME_PER_OUTPUT_TOKEN.name
REQUESTS_RUNNING = m.REQUESTS_RUNNING.name
KV_CACHE_USAGE = m.KV_CACHE_USAGE.name
