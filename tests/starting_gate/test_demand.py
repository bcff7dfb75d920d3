"""The demand the gate saw while cold reaches CloudWatch as the pool's own `Requests`, which its KEDA trigger
reads (cdk/image/scaling.py): the metric and dimensions a scaled-to-zero pool is woken by."""

from __future__ import annotations

import datetime as dt

import boto3
from moto import mock_aws

from cdk.accelerators import ACCELERATORS
from cdk.image.metrics import image_unit
from cdk.image.scaling import cloudwatch_trigger
from common import metric_names
from starting_gate.demand import DemandCounter, flush

UNIT = {"DeploymentUnit": "sd-gpu", "Accelerator": "nvidia"}


@mock_aws
def test_waiting_requests_are_published_as_the_pools_requests() -> None:
    client = boto3.client("cloudwatch", region_name="us-east-1")
    counter = DemandCounter()
    for _ in range(3):
        counter.add()
    assert flush(counter, client, [UNIT]) == 3
    assert flush(counter, client, [UNIT]) == 0  # nothing new, nothing sent
    now = dt.datetime.now(dt.UTC)
    stats = client.get_metric_statistics(
        Namespace=metric_names.NAMESPACE,
        MetricName=metric_names.REQUESTS.name,
        Dimensions=[{"Name": k, "Value": v} for k, v in UNIT.items()],
        StartTime=now - dt.timedelta(minutes=5),
        EndTime=now + dt.timedelta(minutes=1),
        Period=60,
        Statistics=["Sum"],
    )
    assert sum(p["Sum"] for p in stats["Datapoints"]) == 3


def test_the_published_metric_is_the_one_the_pools_trigger_reads() -> None:
    from cdk.config.serving import ServingConfig
    from tests.cdk.conftest import DEFAULT_CONTEXT

    cfg = ServingConfig.from_context(DEFAULT_CONTEXT, accelerators=["nvidia"])
    trigger = cloudwatch_trigger(ACCELERATORS["nvidia"], cfg, "us-east-1")["metadata"]
    assert trigger["namespace"] == metric_names.NAMESPACE
    assert trigger["metricName"] == metric_names.REQUESTS.name
    assert dict(zip(trigger["dimensionName"].split(";"), trigger["dimensionValue"].split(";"), strict=True)) == UNIT
    assert image_unit(ACCELERATORS["nvidia"]).dimensions == UNIT
