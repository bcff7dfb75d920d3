"""The metrics bridge on the real stack: a gateway in front of the session's vLLM publishes each request's
counts and times and vLLM's own gauges under the platform's metric names, as EMF lines and to CloudWatch
(a moto server), and an engine that cannot be read costs its gauges, never the counters."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import openai
import pytest
from moto.server import ThreadedMotoServer

from common import metric_names as m
from tests.llm.conftest import MODEL, client_for
from tests.llm.stack import GatewayProcess, run_gateway

FLUSH_S = "0.5"
UNIT = "llm-cpu-test"
DIMENSIONS = {m.DIMENSION_DEPLOYMENT_UNIT: UNIT, m.DIMENSION_ACCELERATOR: "cpu"}
EMF = {"METRICS": "emf", "METRICS_FLUSH_S": FLUSH_S, "DEPLOYMENT_UNIT": UNIT, "ACCELERATOR": "cpu"}


def emf_lines(gateway: GatewayProcess) -> list[dict[str, Any]]:
    """The EMF documents the gateway has written (its stdout shares the log file with its JSON log lines)."""
    lines = []
    for line in gateway.log.read_text(encoding="utf-8").splitlines():
        if line.startswith("{") and '"_aws"' in line:
            lines.append(json.loads(line))
    return lines


def series(lines: list[dict[str, Any]], name: str) -> list[float]:
    """Every value published for `name` across the lines, after checking each line declares it with its unit."""
    values: list[float] = []
    for line in lines:
        if name not in line:
            continue
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == m.NAMESPACE
        assert directive["Dimensions"] == [list(DIMENSIONS)]
        assert {"Name": name, "Unit": next(s.unit for s in m.LLM_METRICS if s.name == name)} in directive["Metrics"]
        assert {key: line[key] for key in DIMENSIONS} == DIMENSIONS
        value = line[name]
        values += value if isinstance(value, list) else [value]
    return values


def wait_for(gateway: GatewayProcess, name: str, total: float, timeout_s: float = 30) -> list[dict[str, Any]]:
    """The EMF lines once `name` adds up to `total` in them."""
    deadline = time.monotonic() + timeout_s
    while sum(series(lines := emf_lines(gateway), name)) < total:
        assert time.monotonic() < deadline, f"{name} never reached {total}:\n{gateway.tail()}"
        time.sleep(0.2)
    return lines


@pytest.fixture(scope="module")
def emf_gateway(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with METRICS=emf in front of the session's engine."""
    with run_gateway(engine_url, tmp_path_factory.mktemp("emf-gateway"), EMF) as gateway:
        yield gateway


def test_each_request_counts_its_tokens_and_times_and_the_engine_its_gauges(emf_gateway: GatewayProcess) -> None:
    client = client_for(emf_gateway.url)
    sent = time.monotonic()
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Count the lighthouses"}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = iter(stream)
    next(chunks)
    client_ttft_ms = (time.monotonic() - sent) * 1000
    streamed_usage = [chunk.usage for chunk in chunks if chunk.usage is not None][-1]
    client_e2e_ms = (time.monotonic() - sent) * 1000
    whole = client.completions.create(
        model=MODEL, prompt="A harbour at dusk", max_tokens=8, extra_body={"ignore_eos": True}
    )
    with pytest.raises(openai.NotFoundError):  # the engine's 404: the caller's mistake, not an error of ours
        client.completions.create(model="no-such-model", prompt="x", max_tokens=4)
    assert whole.usage is not None

    lines = wait_for(emf_gateway, m.REQUESTS.name, 3)
    assert sum(series(lines, m.ERRORS.name)) == 0
    assert sum(series(lines, m.OUTPUT_TOKENS.name)) == 16 + 8
    assert sum(series(lines, m.PROMPT_TOKENS.name)) == streamed_usage.prompt_tokens + whole.usage.prompt_tokens
    assert len(series(lines, m.LATENCY.name)) == 3
    (ttft,) = series(lines, m.TIME_TO_FIRST_TOKEN.name)  # the stream's only
    (tpot,) = series(lines, m.TIME_PER_OUTPUT_TOKEN.name)
    # The gateway sees the stream before its client does: its times are the client's, less the network.
    assert 0 < ttft <= client_ttft_ms
    assert 0 < ttft + 15 * tpot <= client_e2e_ms
    # vLLM's gauges, sampled every flush even when idle: nothing waits or runs now, and the cache is a percentage.
    time.sleep(float(FLUSH_S) * 3)
    lines = emf_lines(emf_gateway)
    assert series(lines, m.QUEUE_DEPTH.name)[-1] == 0
    assert series(lines, m.REQUESTS_RUNNING.name)[-1] == 0
    assert all(0 <= value <= 100 for value in series(lines, m.KV_CACHE_USAGE.name))


def test_an_unreachable_engine_counts_as_errors_and_costs_only_its_gauges(tmp_path: Path) -> None:
    with run_gateway("http://127.0.0.1:9", tmp_path, EMF) as gateway:
        with pytest.raises(openai.APIStatusError) as refused:
            client_for(gateway.url).completions.create(model=MODEL, prompt="x", max_tokens=4)
        assert refused.value.status_code == 503
        lines = wait_for(gateway, m.ERRORS.name, 1)
        assert sum(series(lines, m.REQUESTS.name)) == 1
        assert series(lines, m.QUEUE_DEPTH.name) == []
        time.sleep(float(FLUSH_S) * 3)
        log = gateway.log.read_text(encoding="utf-8")
        assert log.count("its gauges are left out until they can") == 1, "said once, not at every flush"
        assert "Traceback" not in log


@pytest.fixture
def cloudwatch() -> Iterator[str]:
    """A moto server standing in for CloudWatch; its endpoint."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_metrics_cloudwatch_puts_the_requests_where_cloudwatch_reads_them(
    engine_url: str, cloudwatch: str, tmp_path: Path
) -> None:
    aws = {
        "AWS_ENDPOINT_URL": cloudwatch,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }
    with run_gateway(engine_url, tmp_path, {**EMF, "METRICS": "cloudwatch", **aws}) as gateway:
        client_for(gateway.url).completions.create(
            model=MODEL, prompt="x", max_tokens=4, extra_body={"ignore_eos": True}
        )
        reader = boto3.client("cloudwatch", endpoint_url=cloudwatch, region_name="us-east-1", **_keys(aws))
        now = datetime.now(UTC)
        window = {"StartTime": now - timedelta(minutes=5), "EndTime": now + timedelta(minutes=5), "Period": 60}
        dimensions = [{"Name": name, "Value": value} for name, value in DIMENSIONS.items()]
        deadline = time.monotonic() + 30
        while True:
            points = reader.get_metric_statistics(
                Namespace=m.NAMESPACE,
                MetricName=m.OUTPUT_TOKENS.name,
                Dimensions=dimensions,
                Statistics=["Sum"],
                **window,
            )["Datapoints"]
            if points or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert sum(point["Sum"] for point in points) == 4, gateway.tail()
        listed = {metric["MetricName"] for metric in reader.list_metrics(Namespace=m.NAMESPACE)["Metrics"]}
        assert {m.REQUESTS.name, m.QUEUE_DEPTH.name, m.KV_CACHE_USAGE.name} <= listed


def _keys(env: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}


def test_the_prefix_caches_lookups_and_hits_are_published(emf_gateway: GatewayProcess) -> None:
    """The same long prompt twice: the second finds most of its tokens in vLLM's prefix cache, and the gateway
    publishes what the engine's counters grew by (the dashboard's hit rate is hits over lookups)."""
    client = client_for(emf_gateway.url)
    time.sleep(float(FLUSH_S) * 3)  # a first reading: the baseline the next ones count from
    prompt = "Every lighthouse keeper writes the weather in the log at dawn and at dusk. " * 12
    replies = [client.completions.create(model=MODEL, prompt=prompt, max_tokens=2) for _ in range(2)]
    prompt_tokens = replies[1].usage.prompt_tokens if replies[1].usage else 0
    lines = wait_for(emf_gateway, m.PREFIX_CACHE_HITS.name, prompt_tokens // 2)
    assert sum(series(lines, m.PREFIX_CACHE_QUERIES.name)) >= 2 * prompt_tokens - 1
    assert sum(series(lines, m.PREFIX_CACHE_HITS.name)) < sum(series(lines, m.PREFIX_CACHE_QUERIES.name))
