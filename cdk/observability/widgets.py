"""The metric queries, math expressions and graph widget that every workload's dashboard rows and alarms are built
from.

Every workload's Deployments publish the same way (common/metric_names.py), so a `DeploymentUnit` is all a query
needs to know about any of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw

from cdk.observability import service_metrics as sm
from common import metric_names

PERIOD: Final = Duration.minutes(1)
COST_PERIOD_S: Final = 300
CONTAINER_INSIGHTS: Final = "ContainerInsights"


def service_metric(unit: sm.DeploymentUnit, name: str, statistic: str, period: Duration = PERIOD) -> cw.Metric:
    """One of the platform's own metrics for one deployment unit."""
    return cw.Metric(
        namespace=sm.NAMESPACE,
        metric_name=name,
        dimensions_map=unit.dimensions,
        statistic=statistic,
        period=period,
        label=f"{unit.name} {statistic}",
    )


def running_pods(unit: sm.DeploymentUnit, cluster_name: str, namespace: str, period: Duration = PERIOD) -> cw.Metric:
    """Container Insights' running pods behind the deployment unit's Service (named as the unit)."""
    return cw.Metric(
        namespace=CONTAINER_INSIGHTS,
        metric_name="service_number_of_running_pods",
        dimensions_map={"ClusterName": cluster_name, "Namespace": namespace, "Service": unit.name},
        statistic="Average",
        period=period,
        label=f"{unit.name} pods",
    )


def cost_per_output(
    unit: sm.DeploymentUnit,
    *,
    cluster_name: str,
    namespace: str,
    price_per_hour: float,
    output_metric: str,
    output_id: str,
    per: int,
    per_label: str,
) -> cw.MathExpression:
    """USD per `per` of the unit's output (images, output tokens): instance-hours used x price / output made.

    Instance-hours are the running pods (Container Insights, averaged over the period) x the period: each pod
    occupies one instance priced at `price_per_hour` (the node pools size instances to one pod).
    """
    period = Duration.seconds(COST_PERIOD_S)
    hours = COST_PERIOD_S / 3600
    # Metric ids must be unique across a graph, so they carry the accelerator's name.
    pods, output = f"pods_{unit.accelerator.name}", f"{output_id}_{unit.accelerator.name}"
    return cw.MathExpression(
        expression=f"IF({output} > 0, {per} * {price_per_hour} * {pods} * {hours:.6f} / {output})",
        using_metrics={
            pods: running_pods(unit, cluster_name, namespace, period),
            output: service_metric(unit, output_metric, "Sum", period),
        },
        period=period,
        label=f"{unit.name} USD / {per_label}",
    )


def percent_of(
    parts: Mapping[str, cw.IMetric], whole_id: str, whole: cw.IMetric, *, label: str, period: Duration = PERIOD
) -> cw.MathExpression:
    """100 x the sum of `parts` / `whole` (an error rate); a period without requests is 0 %, not missing."""
    numerator = " + ".join(f"FILL({part}, 0)" for part in parts)
    if len(parts) > 1:
        numerator = f"({numerator})"
    return cw.MathExpression(
        expression=f"100 * {numerator} / IF(FILL({whole_id}, 0) > 0, {whole_id}, 1)",
        using_metrics={**parts, whole_id: whole},
        period=period,
        label=label,
    )


def graph(title: str, metrics: Sequence[cw.IMetric], *, width: int = 8, unit: str | None = None) -> cw.GraphWidget:
    """A 6-high line graph of `metrics` on the left axis, labelled with `unit`."""
    return cw.GraphWidget(
        title=title,
        left=list(metrics),
        width=width,
        height=6,
        left_y_axis=cw.YAxisProps(label=unit, show_units=False) if unit else None,
    )


def sqs_metric(queue_name: str, name: str, label: str, statistic: str = "Maximum") -> cw.Metric:
    """One of the metrics SQS publishes for a queue (every minute while the queue is active)."""
    return cw.Metric(
        namespace=metric_names.SQS_NAMESPACE,
        metric_name=name,
        dimensions_map={metric_names.SQS_DIMENSION_QUEUE: queue_name},
        statistic=statistic,
        period=PERIOD,
        label=label,
    )
