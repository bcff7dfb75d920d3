"""The image service's ScaledObjects (KEDA), as plain dicts.

Each Deployment scales on the service's own `Requests` metric for its deployment unit (CloudWatch,
summed per minute): KEDA feeds it to the HPA as an average per pod, so `scalingTarget<Acc>` is the
number of requests per minute one pod sustains before its latency breaks (docs/serving.md, "Scale").

Each Deployment also scales on the job queue's depth (`aws-sqs-queue`, with KEDA's identity, which needs
sqs:GetQueueAttributes on the queue): `scalingJobsTarget<Acc>` jobs per pod. An async-only
Deployment scales on the queue alone, so its minimum may be 0: the first job wakes it.
"""

from __future__ import annotations

from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.config.serving import ServingConfig
from cdk.image.metrics import image_unit
from cdk.image.workload import deployment_name
from cdk.observability import service_metrics as sm
from cdk.serving.scaling import TRIGGER_AUTH_NAME, metric_trigger, scaled_deployment

SCALED_METRIC: Final = sm.REQUESTS


def cloudwatch_trigger(acc: Accelerator, cfg: ServingConfig, region: str) -> dict[str, Any]:
    """The aws-cloudwatch trigger on this deployment unit's request rate."""
    target = cfg.per_accelerator[acc.name].scaling_target
    return metric_trigger(image_unit(acc).dimensions, SCALED_METRIC, stat="Sum", target=target, region=region)


def sqs_trigger(acc: Accelerator, cfg: ServingConfig, region: str, queue_url: str) -> dict[str, Any]:
    """The aws-sqs-queue trigger on the job queue.

    Metadata keys as parsed by kedacore/keda v2.20.1, pkg/scalers/aws_sqs_queue_scaler.go
    (queueURL, queueLength, activationQueueLength, scaleOnInFlight, awsRegion).
    """
    return {
        "type": "aws-sqs-queue",
        "authenticationRef": {"name": TRIGGER_AUTH_NAME},
        "metadata": {
            "queueURL": queue_url,
            "queueLength": str(cfg.per_accelerator[acc.name].jobs_target),
            "activationQueueLength": "0",  # one waiting job wakes a Deployment scaled to zero
            # Jobs being run count too, so a pod is not scaled away under the job it holds.
            "scaleOnInFlight": "true",
            "awsRegion": region,
        },
    }


def scaled_object(
    acc: Accelerator, cfg: ServingConfig, region: str, jobs_queue_url: str | None = None
) -> dict[str, Any]:
    """Scale one Deployment between its configured min and max replicas (async-only: on the queue only)."""
    per = cfg.per_accelerator[acc.name]
    triggers = [] if per.async_only else [cloudwatch_trigger(acc, cfg, region)]
    if jobs_queue_url is not None:
        triggers.append(sqs_trigger(acc, cfg, region, jobs_queue_url))
    return scaled_deployment(deployment_name(acc), cfg, per.min_replicas, per.max_replicas, triggers)
