"""The LLM section of the dashboard and its alarms, built in a small Stack with cdk.json's LLM settings; without
the LLM input the dashboard and alarms are byte for byte what they were before the section existed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cdk.accelerators import ACCELERATORS
from cdk.llm import names
from cdk.observability.dashboard_svg import dashboard_body_from_template
from common import metric_names
from common.metrics.recorder import MetricsRecorder
from tests.cdk.observability_stack import (
    GOLDEN,
    LLM,
    SERVING,
    dashboard_and_alarms,
    golden_text,
    image_inputs,
    llm_inputs,
    observability_template,
)
from tests.cdk.test_serving_metrics_contract import PUBLISHED

LLM_NAMES = {m.name for m in metric_names.LLM_METRICS}
LLM_UNITS = {names.deployment_name(a): a for a in ACCELERATORS.values()}


@pytest.fixture(scope="module")
def without_llm() -> dict[str, Any]:
    return observability_template([image_inputs()])


@pytest.fixture(scope="module")
def with_llm() -> dict[str, Any]:
    return observability_template([image_inputs(), llm_inputs()])


def llm_widgets(with_llm: dict[str, Any], without_llm: dict[str, Any]) -> list[dict[str, Any]]:
    """The widgets the LLM input added, after checking that the image ones before them are unchanged."""
    image = dashboard_body_from_template(without_llm)["widgets"]
    widgets = dashboard_body_from_template(with_llm)["widgets"]
    assert widgets[: len(image)] == image
    return widgets[len(image) :]


def lines(widget: dict[str, Any]) -> list[tuple[list[Any], dict[str, Any]]]:
    """(plain parts, options) of each metric line of a graph widget."""
    out = []
    for line in widget.get("properties", {}).get("metrics", []):
        options = next((p for p in line if isinstance(p, dict)), {})
        out.append(([p for p in line if not isinstance(p, dict)], options))
    return out


def platform_metrics(widget: dict[str, Any]) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(name, dimensions, options) of every metric of the platform's namespace a widget plots or computes with."""
    found = []
    for parts, options in lines(widget):
        if parts and parts[0] == metric_names.NAMESPACE:
            found.append((parts[1], dict(zip(parts[2::2], parts[3::2], strict=True)), options))
    return found


def stat(options: dict[str, Any]) -> str:
    """A line's statistic: CDK leaves out the dashboard's default (Average), as it does the 300 s period."""
    return options.get("stat", "Average")


def by_title(widgets: list[dict[str, Any]], start: str) -> dict[str, Any]:
    (widget,) = [w for w in widgets if w["properties"].get("title", "").startswith(start)]
    return widget


def evaluate(expression: str, values: dict[str, float]) -> float | None:
    """A metric math expression of the forms used here (IF, FILL, + - * /), for one datapoint."""
    python = re.sub(r"FILL\((\w+), 0\)", r"(\1 if \1 is not None else 0)", expression)
    python = re.sub(r"IF\(([^,]+), ([^,]+), ([^)]+)\)", r"((\2) if (\1) else (\3))", python)
    python = re.sub(r"IF\(([^,]+), (.+)\)$", r"((\2) if (\1) else None)", python)
    return eval(python, {}, dict(values))  # noqa: S307 - the expression is our own, built by the code under test


def test_without_llm_the_dashboard_and_alarms_are_byte_identical(without_llm):
    assert golden_text(without_llm) == GOLDEN.read_text()


def test_the_llm_input_adds_its_alarms_and_leaves_the_others_as_they_were(with_llm, without_llm):
    before, after = dashboard_and_alarms(without_llm), dashboard_and_alarms(with_llm)
    added = {k for k in after if k not in before}
    assert {k for k in before if after.get(k) != before[k] and after[k]["Type"] == "AWS::CloudWatch::Alarm"} == set()
    assert {re.sub(r"[0-9A-F]{8}$", "", k) for k in added} == {
        "AlarmsLlmTtftP90Neuron",
        "AlarmsLlmTtftP90Nvidia",
        "AlarmsLlmErrorRateNeuron",
        "AlarmsLlmErrorRateNvidia",
    }


def test_llm_widgets_use_only_the_gateways_published_metrics_of_the_llm_units(with_llm, without_llm):
    used = [m for w in llm_widgets(with_llm, without_llm) for m in platform_metrics(w)]
    assert {name for name, _, _ in used} <= PUBLISHED
    # Every metric the gateway publishes is on the dashboard, and nothing else of the namespace.
    assert {name for name, _, _ in used} == LLM_NAMES
    for _, dims, _ in used:
        acc = LLM_UNITS[dims[metric_names.DIMENSION_DEPLOYMENT_UNIT]]
        # Exactly what the gateway's recorder publishes with DEPLOYMENT_UNIT and ACCELERATOR (its accelerator).
        assert dims == MetricsRecorder(names.deployment_name(acc), acc.name).dimensions
    assert {d[metric_names.DIMENSION_DEPLOYMENT_UNIT] for _, d, _ in used} == {"llm-neuron", "llm-gpu"}


@pytest.mark.parametrize(
    ("title", "metric"),
    [("Time to first token p50 / p90", "TimeToFirstToken"), ("Inter-token latency p50 / p90", "TimePerOutputToken")],
)
def test_token_latencies_are_p50_and_p90_per_accelerator(with_llm, without_llm, title, metric):
    widget = by_title(llm_widgets(with_llm, without_llm), title)
    stats = {(d[metric_names.DIMENSION_DEPLOYMENT_UNIT], stat(o)) for name, d, o in platform_metrics(widget)}
    assert {name for name, _, _ in platform_metrics(widget)} == {metric}
    assert stats == {(unit, stat) for unit in ("llm-neuron", "llm-gpu") for stat in ("p50", "p90")}
    if metric == "TimePerOutputToken":
        # The gateway publishes a per-request mean time between tokens, not a per-token distribution.
        assert "per-request mean" in widget["properties"]["title"]


def test_tokens_per_second_divide_the_minutes_sum_by_its_period(with_llm, without_llm):
    widget = by_title(llm_widgets(with_llm, without_llm), "Tokens per second")
    metrics = {o["id"]: (name, o) for name, _, o in platform_metrics(widget)}
    expressions = [o for parts, o in lines(widget) if "expression" in o]
    assert len(expressions) == 4  # output and prompt, per accelerator
    for expr in expressions:
        (metric_id,) = re.fullmatch(r"(\w+) / PERIOD\((\w+)\)", expr["expression"]).groups()[:1]
        name, options = metrics[metric_id]
        assert name in {"OutputTokens", "PromptTokens"} and stat(options) == "Sum"
        assert options["visible"] is False and expr["period"] == 60
    output = [e for e in expressions if "output" in e["label"]]
    assert {metrics[e["expression"].split(" ")[0]][0] for e in output} == {"OutputTokens"}


def test_cost_per_million_output_tokens_is_instance_hours_times_price_over_tokens(with_llm, without_llm):
    widget = by_title(llm_widgets(with_llm, without_llm), "Cost per million output tokens")
    plain = {o["id"]: (parts, o) for parts, o in lines(widget) if "id" in o and "expression" not in o}
    expressions = [o for _, o in lines(widget) if "expression" in o]
    assert LLM is not None and len(expressions) == len(LLM.accelerators)
    for expr in expressions:
        ids = set(re.findall(r"\b[a-z]+_[a-z]+\b", expr["expression"]))
        (pods_id,) = [i for i in ids if i.startswith("pods_")]
        (tokens_id,) = [i for i in ids if i.startswith("tokens_")]
        pods, tokens = plain[pods_id], plain[tokens_id]
        acc = pods_id.removeprefix("pods_")
        unit = names.deployment_name(ACCELERATORS[acc])
        # The pods: Container Insights' running pods behind the LLM Service, averaged over the 5-minute period.
        dims = {"ClusterName": "sd-cluster", "Namespace": SERVING.namespace, "Service": unit}
        assert pods[0][:2] == ["ContainerInsights", "service_number_of_running_pods"]
        assert dict(zip(pods[0][2::2], pods[0][3::2], strict=True)) == dims
        assert (stat(pods[1]), pods[1].get("period", 300)) == ("Average", 300)
        assert tokens[0][:2] == [metric_names.NAMESPACE, "OutputTokens"] and stat(tokens[1]) == "Sum"
        price = LLM.per_accelerator[acc].price_per_hour
        # 2 pods for 5 minutes make 600,000 tokens: 2 x 5/60 h x price per 0.6 M tokens.
        assert evaluate(expr["expression"], {pods_id: 2, tokens_id: 600_000}) == pytest.approx(
            2 * (5 / 60) * price / 0.6, rel=1e-5
        )
        assert evaluate(expr["expression"], {pods_id: 2, tokens_id: 0}) is None  # no tokens: no cost point
        assert expr["label"] == f"{unit} USD / 1M output tokens"


def test_the_image_cost_is_the_same_expression_per_1000_images(without_llm):
    body = dashboard_body_from_template(without_llm)
    widget = by_title(body["widgets"], "Cost per 1,000 images")
    for expr in [o for _, o in lines(widget) if "expression" in o]:
        acc = expr["expression"].split(" ")[0].removeprefix("IF(images_")
        price = SERVING.per_accelerator[acc].price_per_hour
        value = evaluate(expr["expression"], {f"pods_{acc}": 3, f"images_{acc}": 500})
        assert value == pytest.approx(1000 * 3 * (5 / 60) * price / 500, rel=1e-5)


def test_queue_running_kv_cache_and_errors_are_on_the_llm_section(with_llm, without_llm):
    widgets = llm_widgets(with_llm, without_llm)
    queue = {(n, stat(o)) for n, _, o in platform_metrics(by_title(widgets, "vLLM queue / running"))}
    assert queue == {("QueueDepth", "Maximum"), ("RequestsRunning", "Maximum")}
    kv = {(n, stat(o)) for n, _, o in platform_metrics(by_title(widgets, "KV cache use"))}
    assert kv == {("KvCacheUsage", "Average"), ("KvCacheUsage", "Maximum")}
    rate = by_title(widgets, "LLM error rate")
    ids = {o["id"]: n for n, _, o in platform_metrics(rate)}
    for expr in [o for _, o in lines(rate) if "expression" in o]:
        acc = expr["label"].split(" ")[0]
        suffix = LLM_UNITS[acc].name
        assert (ids[f"errors_{suffix}"], ids[f"requests_{suffix}"]) == ("Errors", "Requests")
        values = {f"errors_{suffix}": 3, f"requests_{suffix}": 60}
        assert evaluate(expr["expression"], values) == pytest.approx(5.0)
        assert evaluate(expr["expression"], {f"errors_{suffix}": None, f"requests_{suffix}": None}) == 0


def test_the_header_names_the_model_and_the_llm_deployments(with_llm, without_llm):
    header = llm_widgets(with_llm, without_llm)[0]["properties"]["markdown"]
    assert LLM is not None and f"`{LLM.served_model_name}`" in header
    assert "`llm-neuron`, `llm-gpu`" in header


def alarms_named(template: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"] for k, v in template["Resources"].items() if k.startswith(prefix) and "Alarm" in v["Type"]
    }


def test_ttft_p90_alarm_per_accelerator_at_the_configured_threshold(with_llm):
    alarms = alarms_named(with_llm, "AlarmsLlmTtftP90")
    assert LLM is not None and len(alarms) == 2
    seen = set()
    for props in alarms.values():
        (query,) = props["Metrics"]
        metric = query["MetricStat"]["Metric"]
        assert (metric["Namespace"], metric["MetricName"]) == (metric_names.NAMESPACE, "TimeToFirstToken")
        assert (query["MetricStat"]["Stat"], query["MetricStat"]["Period"]) == ("p90", 60)
        assert props["Threshold"] == LLM.alarm_ttft_p90_ms == 2000
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
        assert props["EvaluationPeriods"] == SERVING.alarm_evaluation_periods
        dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        acc = LLM_UNITS[dims["DeploymentUnit"]]
        assert dims == MetricsRecorder(dims["DeploymentUnit"], acc.name).dimensions
        # The same topic as the image alarms.
        assert props["AlarmActions"] == props["OKActions"] == [SERVING.alarm_topic_arn]
        seen.add(dims["DeploymentUnit"])
    assert seen == {"llm-neuron", "llm-gpu"}


def test_llm_error_rate_alarm_reuses_the_5xx_rate_setting(with_llm):
    alarms = alarms_named(with_llm, "AlarmsLlmErrorRate")
    assert len(alarms) == 2
    for props in alarms.values():
        assert props["Threshold"] == SERVING.alarm_5xx_rate_percent
        assert props["AlarmActions"] == [SERVING.alarm_topic_arn]
        stats = {
            q["MetricStat"]["Metric"]["MetricName"]: q["MetricStat"] for q in props["Metrics"] if "MetricStat" in q
        }
        assert set(stats) == {"Errors", "Requests"} and {s["Stat"] for s in stats.values()} == {"Sum"}
        units = {d["Value"] for s in stats.values() for d in s["Metric"]["Dimensions"] if d["Name"] == "DeploymentUnit"}
        assert len(units) == 1 and units <= set(LLM_UNITS)


def test_the_prefix_cache_hit_rate_is_hits_over_lookups_per_deployment(with_llm, without_llm):
    """The share of prompt tokens found in vLLM's prefix cache, from the two counters the gateway publishes."""
    widget = by_title(llm_widgets(with_llm, without_llm), "Prefix cache hit rate")
    ids = {o["id"]: (n, stat(o)) for n, _, o in platform_metrics(widget)}
    expressions = [o for _, o in lines(widget) if "expression" in o]
    assert len(expressions) == len(LLM_UNITS)
    for expr in expressions:
        suffix = LLM_UNITS[expr["label"].split(" ")[0]].name
        hits, lookups = f"hits_{suffix}", f"lookups_{suffix}"
        assert (ids[hits], ids[lookups]) == (("PrefixCacheHits", "Sum"), ("PrefixCacheQueries", "Sum"))
        assert evaluate(expr["expression"], {hits: 300, lookups: 400}) == pytest.approx(75.0)
        assert evaluate(expr["expression"], {hits: None, lookups: None}) == 0  # no lookups: prefix caching off
