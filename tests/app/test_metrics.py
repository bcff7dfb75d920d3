"""Metrics: aggregation, the EMF line format, and PutMetricData against moto's CloudWatch."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from app.metrics.aggregator import MetricsAggregator
from common import metric_names as m
from common.metrics.flusher import flush_once, make_publisher, run_flusher
from common.metrics.publishers import CloudWatchPublisher, EmfPublisher
from common.metrics.recorder import MetricsRecorder


def recorded() -> MetricsAggregator:
    aggregator = MetricsAggregator("sd-gpu", "cuda")
    aggregator.request_finished(200, 120.0, images=1)
    aggregator.request_finished(200, 80.0, images=1)
    aggregator.request_finished(500, 5.0, images=0)
    aggregator.batch_started(2, queue_depth=3)
    aggregator.job_finished(succeeded=True)
    aggregator.job_finished(succeeded=True)
    aggregator.job_finished(succeeded=False)
    return aggregator


def test_aggregator_collects_and_drains():
    aggregator = recorded()
    batch = aggregator.drain()
    assert batch.dimensions == {"DeploymentUnit": "sd-gpu", "Accelerator": "nvidia"}
    assert batch.values[m.LATENCY.name] == [120.0, 80.0, 5.0]
    assert sum(batch.values[m.ERRORS.name]) == 1
    assert batch.values[m.BATCH_SIZE.name] == [2]
    assert aggregator.drain().empty


def test_emf_line_declares_every_metric_with_its_unit_and_dimensions():
    stream = io.StringIO()
    EmfPublisher(stream).publish(recorded().drain())
    (line,) = stream.getvalue().splitlines()
    doc = json.loads(line)
    directive = doc["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == m.NAMESPACE
    assert directive["Dimensions"] == [["DeploymentUnit", "Accelerator"]]
    units = {metric["Name"]: metric["Unit"] for metric in directive["Metrics"]}
    assert units[m.LATENCY.name] == "Milliseconds"
    assert set(units) == {spec.name for spec in m.ALL_METRICS}
    assert doc["DeploymentUnit"] == "sd-gpu" and doc["Accelerator"] == "nvidia"
    assert doc[m.REQUESTS.name] == 3.0  # counters are summed
    assert (doc[m.JOBS_SUCCEEDED.name], doc[m.JOBS_FAILED.name]) == (2.0, 1.0)
    assert doc[m.LATENCY.name] == [120.0, 80.0, 5.0]  # samples keep every value for percentiles


def test_emf_splits_more_than_100_values_into_several_lines():
    aggregator = MetricsAggregator("u", "cpu")
    for i in range(250):
        aggregator.request_finished(200, float(i), images=1)
    stream = io.StringIO()
    EmfPublisher(stream).publish(aggregator.drain())
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 3
    assert [len(line[m.LATENCY.name]) for line in lines] == [100, 100, 50]


def test_cloudwatch_publisher_puts_metrics_that_cloudwatch_can_read_back():
    with mock_aws():
        client = boto3.client("cloudwatch", region_name="us-east-1")
        CloudWatchPublisher(client).publish(recorded().drain())
        listed = client.list_metrics(Namespace=m.NAMESPACE)["Metrics"]
        assert {metric["MetricName"] for metric in listed} == {spec.name for spec in m.ALL_METRICS}
        dims = [{"Name": "DeploymentUnit", "Value": "sd-gpu"}, {"Name": "Accelerator", "Value": "nvidia"}]
        now = datetime.now(UTC)
        window = {"StartTime": now - timedelta(minutes=5), "EndTime": now + timedelta(minutes=5), "Period": 60}
        requests = client.get_metric_statistics(
            Namespace=m.NAMESPACE, MetricName=m.REQUESTS.name, Dimensions=dims, Statistics=["Sum"], **window
        )["Datapoints"]
        assert sum(point["Sum"] for point in requests) == 3.0
        latency = client.get_metric_statistics(
            Namespace=m.NAMESPACE, MetricName=m.LATENCY.name, Dimensions=dims, Statistics=["Maximum"], **window
        )["Datapoints"]
        assert max(point["Maximum"] for point in latency) == 120.0


def test_cloudwatch_publisher_splits_large_batches():
    calls = []

    class Client:
        def put_metric_data(self, **kwargs):
            calls.append(kwargs)

    aggregator = MetricsAggregator("u", "neuron")
    for i in range(400):
        aggregator.request_finished(200, float(i), images=1)
    CloudWatchPublisher(Client()).publish(aggregator.drain())
    latency = [d for call in calls for d in call["MetricData"] if d["MetricName"] == m.LATENCY.name]
    assert [len(d["Values"]) for d in latency] == [150, 150, 100]
    assert all(len(d["Values"]) == len(d["Counts"]) for d in latency)
    assert latency[0]["Dimensions"] == [
        {"Name": "DeploymentUnit", "Value": "u"},
        {"Name": "Accelerator", "Value": "neuron"},
    ]


def test_make_publisher_follows_the_setting():
    assert make_publisher("off") is None
    assert isinstance(make_publisher("emf"), EmfPublisher)


def test_a_failing_publisher_is_logged_not_raised(caplog):
    class Broken:
        def publish(self, batch):
            raise ConnectionError("no network")

    asyncio.run(flush_once(recorded(), Broken()))
    assert "publishing metrics failed" in caplog.text


def test_flusher_publishes_in_the_background_and_once_more_on_stop():
    published = []

    class Collect:
        def publish(self, batch):
            published.append(batch)

    async def scenario():
        aggregator = recorded()

        async def sample():
            aggregator.queue_sampled(7)

        task = asyncio.create_task(run_flusher(aggregator, Collect(), 0.05, sample))
        await asyncio.sleep(0.2)
        aggregator.request_finished(200, 1.0, images=1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert published[0].values[m.QUEUE_DEPTH.name][-1] == 7
    assert published[-1].values[m.REQUESTS.name] == [1]  # the last flush on stop


def test_a_sample_that_fails_is_logged_and_the_counters_still_flush(caplog):
    published = []

    class Collect:
        def publish(self, batch):
            published.append(batch)

    async def broken_sample():
        raise ConnectionError("engine gone")

    async def scenario():
        aggregator = MetricsAggregator("u", "cpu")
        task = asyncio.create_task(run_flusher(aggregator, Collect(), 0.05, broken_sample))
        aggregator.request_finished(200, 1.0, images=1)
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert "sampling metrics failed" in caplog.text
    assert published[0].values[m.REQUESTS.name] == [1]


def test_a_recorder_refuses_an_accelerator_the_stacks_do_not_name():
    with pytest.raises(ValueError, match="accelerator must be one of neuron, nvidia, cpu, not 'gpu'"):
        MetricsRecorder("u", "gpu")
