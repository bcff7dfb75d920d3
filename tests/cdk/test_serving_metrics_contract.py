"""Dashboard, alarms and KEDA use exactly the metric names and dimensions the service publishes."""

from __future__ import annotations

import json

from app.metrics.aggregator import MetricsAggregator
from cdk.accelerators import ACCELERATORS
from cdk.image.workload import deployment_name as image_deployment_name
from cdk.llm.names import deployment_name
from common import metric_names

# The service's metrics and the routing controller's (cost-with-failover, the default): the default synth shows
# all of them.
IMAGE_PUBLISHED = {m.name for m in (*metric_names.ALL_METRICS, *metric_names.CONTROLLER_METRICS)}
# And the LLM gateway's: whatever a dashboard, alarm or trigger reads is one of these.
PUBLISHED = IMAGE_PUBLISHED | {m.name for m in metric_names.LLM_METRICS}


def service_metrics_in_dashboard(body):
    """(metric name, dimension names) for every metric of the service's namespace in the dashboard."""
    found = []
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            parts = [p for p in line if not isinstance(p, dict)]
            if parts and parts[0] == metric_names.NAMESPACE:
                found.append((parts[1], frozenset(parts[2::2])))
    return found


def dashboard_body(template):
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    # Tokens (cluster name, ALB dimension) are joined in; replace them with placeholders to parse.
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))


def test_dashboard_uses_the_published_metrics(serving):
    used = service_metrics_in_dashboard(dashboard_body(serving.template))
    names = {n for n, _ in used}
    assert names <= PUBLISHED
    llm = {m.name for m in metric_names.LLM_METRICS} if serving.llm is not None else set()
    assert names == IMAGE_PUBLISHED | llm
    # CloudWatch matches a dimension set regardless of order.
    assert {dims for _, dims in used} == {frozenset(metric_names.DIMENSIONS)}


def alarm_metrics(props):
    """(namespace, name, dimensions) of every plain metric an alarm reads, in either CFN form."""
    if "MetricName" in props:
        yield props.get("Namespace"), props["MetricName"], props.get("Dimensions", [])
    for query in props.get("Metrics", []):
        metric = query.get("MetricStat", {}).get("Metric")
        if metric:
            yield metric.get("Namespace"), metric["MetricName"], metric.get("Dimensions", [])


def test_alarms_use_the_published_metrics(serving):
    alarms = serving.template.find_resources("AWS::CloudWatch::Alarm")
    used = [m for a in alarms.values() for m in alarm_metrics(a["Properties"]) if m[0] == metric_names.NAMESPACE]
    image = {metric_names.LATENCY.name, metric_names.ROUTING_WEIGHT.name}
    # With llmEnabled, the p90 time to first token and the error rate (Errors / Requests) per LLM Deployment.
    llm = {metric_names.TIME_TO_FIRST_TOKEN.name, metric_names.ERRORS.name, metric_names.REQUESTS.name}
    assert {name for _, name, _ in used} == image | (llm if serving.llm is not None else set())
    units = set()
    for _, _, dimensions in used:
        dims = {d["Name"]: d["Value"] for d in dimensions}
        assert set(dims) == set(metric_names.DIMENSIONS)
        units.add(dims[metric_names.DIMENSION_DEPLOYMENT_UNIT])
    llm_units = {deployment_name(a) for a in ACCELERATORS.values()} if serving.llm is not None else set()
    assert units == {image_deployment_name(a) for a in ACCELERATORS.values()} | llm_units


def test_scaled_objects_use_the_published_metric_and_deployment_unit(serving_manifests):
    serving_units = {image_deployment_name(a) for a in ACCELERATORS.values()}  # not the routing controller
    deployments = {
        m["metadata"]["name"]: m
        for m in serving_manifests
        if m["kind"] == "Deployment" and m["metadata"]["name"] in serving_units
    }
    # The image service's (the LLM Deployments': tests/cdk/test_llm_serving.py).
    scaled = [m for m in serving_manifests if m["kind"] == "ScaledObject" and m["metadata"]["name"] in serving_units]
    assert {s["spec"]["scaleTargetRef"]["name"] for s in scaled} == set(deployments)
    for so in scaled:
        (trigger,) = [t for t in so["spec"]["triggers"] if t["type"] == "aws-cloudwatch"]
        md = trigger["metadata"]
        assert md["namespace"] == metric_names.NAMESPACE
        assert md["metricName"] in PUBLISHED
        dims = dict(zip(md["dimensionName"].split(";"), md["dimensionValue"].split(";"), strict=True))
        assert set(dims) == set(metric_names.DIMENSIONS)
        env = {
            e["name"]: e["value"]
            for e in deployments[so["spec"]["scaleTargetRef"]["name"]]["spec"]["template"]["spec"]["containers"][0][
                "env"
            ]
        }
        # The dimensions are exactly those the service's own aggregator publishes with this pod's env.
        assert dims == MetricsAggregator(env["DEPLOYMENT_UNIT"], env["BACKEND"]).dimensions
        assert trigger["authenticationRef"]["name"] in {
            m["metadata"]["name"] for m in serving_manifests if m["kind"] == "TriggerAuthentication"
        }


def test_scaling_bounds_come_from_config(serving, serving_manifests):
    image_units = {image_deployment_name(a) for a in ACCELERATORS.values()}
    for so in (m for m in serving_manifests if m["kind"] == "ScaledObject" and m["metadata"]["name"] in image_units):
        acc = next(a for a in ACCELERATORS.values() if image_deployment_name(a) == so["metadata"]["name"])
        per = serving.config.per_accelerator[acc.name]
        assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (per.min_replicas, per.max_replicas)
        (cloudwatch,) = [t for t in so["spec"]["triggers"] if t["type"] == "aws-cloudwatch"]
        assert float(cloudwatch["metadata"]["targetMetricValue"]) == per.scaling_target


def test_dashboard_picture_is_current(serving):
    from pathlib import Path

    from cdk.observability.dashboard_svg import dashboard_body_from_template, render_svg

    body = dashboard_body_from_template(serving.template.to_json())
    svg = render_svg(body)
    for widget in body["widgets"]:
        title = widget["properties"].get("title")
        if title:
            assert title.replace("&", "&amp;") in svg
    # With llmEnabled the dashboard has the LLM section below the image service's.
    picture = "dashboard-layout-llm.svg" if serving.llm is not None else "dashboard-layout.svg"
    committed = Path(__file__).resolve().parents[2] / "docs" / picture
    synth = (
        "npx cdk synth -q -c exampleEnvironment=true -c llmEnabled=true" if serving.llm is not None else "make synth"
    )
    rerender = (
        f"{synth} && python -m cdk.observability.dashboard_svg cdk.out/SdOnEksServing.template.json > docs/{picture}"
    )
    if serving.llm is not None:
        assert "Cost per million output tokens (USD)" in svg and "Cost per 1,000 images (USD)" in svg
    assert committed.read_text() == svg, f"the picture is stale; re-render with: {rerender}"
