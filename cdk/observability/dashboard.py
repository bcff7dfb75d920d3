"""The serving dashboard: service metrics per accelerator, pods and accelerator utilization, ALB, cost.

Widget definitions are built by `dashboard_rows` (CDK widget objects) so the same list feeds the
Dashboard construct and the offline layout picture in docs/.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from app import metric_names
from cdk.accelerators import Accelerator
from cdk.observability import service_metrics as sm

PERIOD: Final = Duration.minutes(1)
COST_PERIOD_S: Final = 300
ALB_NAMESPACE: Final = "AWS/ApplicationELB"
CONTAINER_INSIGHTS: Final = "ContainerInsights"
# Container Insights (enhanced observability) per-node accelerator utilization, by cluster.


@dataclass(frozen=True)
class JobQueues:
    """The job queue and its dead-letter queue, by their SQS names (the metrics' QueueName)."""

    queue_name: str
    dead_letter_queue_name: str


@dataclass(frozen=True)
class DashboardInputs:
    """What the dashboard needs from the stacks."""

    accelerators: Sequence[Accelerator]
    cluster_name: str
    namespace: str
    load_balancer: str  # the ALB's `app/<name>/<id>` metric dimension
    price_per_hour: Mapping[str, float]
    routing_weights: bool = False  # the routing controller publishes RoutingWeight (cost-with-failover)
    jobs: JobQueues | None = None


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


def jobs_row(inputs: DashboardInputs, queues: JobQueues) -> list[cw.IWidget]:
    """Queue depth, age of the oldest job, jobs finished and failed per minute, dead-letter depth."""
    accs = list(inputs.accelerators)
    finished = [service_metric(a, sm.JOBS_SUCCEEDED, "Sum") for a in accs]
    failed = [service_metric(a, sm.JOBS_FAILED, "Sum") for a in accs]
    return [
        _graph(
            "Job queue depth",
            [
                sqs_metric(queues.queue_name, metric_names.SQS_VISIBLE, "waiting"),
                sqs_metric(queues.queue_name, metric_names.SQS_NOT_VISIBLE, "running"),
            ],
            width=6,
            unit="jobs",
        ),
        _graph(
            "Age of the oldest job (s)",
            [sqs_metric(queues.queue_name, metric_names.SQS_OLDEST_AGE, "oldest job")],
            width=6,
            unit="s",
        ),
        _graph("Jobs finished / failed per minute", finished + failed, width=6, unit="jobs"),
        _graph(
            "Dead-letter queue depth",
            [sqs_metric(queues.dead_letter_queue_name, metric_names.SQS_VISIBLE, "dead-lettered jobs")],
            width=6,
            unit="jobs",
        ),
    ]


def service_metric(acc: Accelerator, name: str, statistic: str, period: Duration = PERIOD) -> cw.Metric:
    """One of the service's own metrics for one accelerator's deployment unit."""
    return cw.Metric(
        namespace=sm.NAMESPACE,
        metric_name=name,
        dimensions_map=sm.dimensions(acc),
        statistic=statistic,
        period=period,
        label=f"{acc.deployment_name} {statistic}",
    )


def running_pods(acc: Accelerator, inputs: DashboardInputs, period: Duration = PERIOD) -> cw.Metric:
    """Container Insights' running pods behind the accelerator's Service."""
    return cw.Metric(
        namespace=CONTAINER_INSIGHTS,
        metric_name="service_number_of_running_pods",
        dimensions_map={
            "ClusterName": inputs.cluster_name,
            "Namespace": inputs.namespace,
            "Service": acc.deployment_name,
        },
        statistic="Average",
        period=period,
        label=f"{acc.deployment_name} pods",
    )


def alb_metric(name: str, statistic: str, inputs: DashboardInputs) -> cw.Metric:
    """An ALB-level metric of the load balancer the Ingress created."""
    return cw.Metric(
        namespace=ALB_NAMESPACE,
        metric_name=name,
        dimensions_map={"LoadBalancer": inputs.load_balancer},
        statistic=statistic,
        period=PERIOD,
        label=name,
    )


def healthy_hosts_query(inputs: DashboardInputs, group_by_target_group: bool) -> str:
    """Metrics Insights: the minimum healthy host count over this ALB's target groups."""
    # A CloudWatch Metrics Insights query, not a database: the value is the ALB's own dimension.
    query = (
        f'SELECT MIN(HealthyHostCount) FROM SCHEMA("{ALB_NAMESPACE}", LoadBalancer, TargetGroup) '  # noqa: S608
        f"WHERE LoadBalancer = '{inputs.load_balancer}'"
    )
    return query + (" GROUP BY TargetGroup" if group_by_target_group else "")


def cost_per_1000_images(acc: Accelerator, inputs: DashboardInputs) -> cw.MathExpression:
    """USD per 1,000 images: instance-hours used (running pods x period) x price / images made.

    One pod per accelerator instance (the node pools size instances to one pod), so pods = instances.
    """
    period = Duration.seconds(COST_PERIOD_S)
    price = inputs.price_per_hour[acc.name]
    hours = COST_PERIOD_S / 3600
    # Metric ids must be unique across a graph, so they carry the accelerator's name.
    pods, images = f"pods_{acc.name}", f"images_{acc.name}"
    return cw.MathExpression(
        expression=f"IF({images} > 0, 1000 * {price} * {pods} * {hours:.6f} / {images})",
        using_metrics={
            pods: running_pods(acc, inputs, period),
            images: service_metric(acc, sm.IMAGES_GENERATED, "Sum", period),
        },
        period=period,
        label=f"{acc.deployment_name} USD / 1000 images",
    )


def _graph(title: str, metrics: Sequence[cw.IMetric], *, width: int = 8, unit: str | None = None) -> cw.GraphWidget:
    return cw.GraphWidget(
        title=title,
        left=list(metrics),
        width=width,
        height=6,
        left_y_axis=cw.YAxisProps(label=unit, show_units=False) if unit else None,
    )


def dashboard_rows(inputs: DashboardInputs) -> list[list[cw.IWidget]]:
    """The dashboard, row by row."""
    accs = list(inputs.accelerators)
    latency = [service_metric(a, sm.LATENCY, s) for a in accs for s in ("p50", "p90", "p99")]
    rows: list[list[cw.IWidget]] = [
        [cw.TextWidget(markdown=_header(inputs), width=24, height=2)],
        [
            _graph("Requests per minute", [service_metric(a, sm.REQUESTS, "Sum") for a in accs], unit="requests"),
            _graph("Latency p50 / p90 / p99 (ms)", latency, unit="ms"),
            _graph("Errors (5xx) per minute", [service_metric(a, sm.ERRORS, "Sum") for a in accs], unit="errors"),
        ],
        [
            _graph("Queue depth (max)", [service_metric(a, sm.QUEUE_DEPTH, "Maximum") for a in accs]),
            _graph("Batch size (average)", [service_metric(a, sm.BATCH_SIZE, "Average") for a in accs]),
            _graph("Images per minute", [service_metric(a, sm.IMAGES_GENERATED, "Sum") for a in accs], unit="images"),
        ],
    ]
    utilization = [
        cw.Metric(
            namespace=CONTAINER_INSIGHTS,
            metric_name=a.utilization_metric,
            dimensions_map={"ClusterName": inputs.cluster_name},
            statistic="Average",
            period=PERIOD,
            label=f"{a.name} utilization %",
        )
        for a in accs
    ]
    # Name only the enabled accelerators: a disabled one leaves no trace on the dashboard.
    utilization_units = " / ".join(a.compute_unit for a in accs)
    rows.append(
        [
            _graph("Running pods", [running_pods(a, inputs) for a in accs], width=12, unit="pods"),
            _graph(f"Accelerator utilization ({utilization_units}, %)", utilization, width=12, unit="%"),
        ]
    )
    rows.append(
        [
            _graph("ALB requests per minute", [alb_metric("RequestCount", "Sum", inputs)], width=6),
            _graph(
                "ALB 4xx / 5xx per minute",
                [
                    alb_metric("HTTPCode_Target_4XX_Count", "Sum", inputs),
                    alb_metric("HTTPCode_Target_5XX_Count", "Sum", inputs),
                    alb_metric("HTTPCode_ELB_5XX_Count", "Sum", inputs),
                ],
                width=6,
            ),
            _graph(
                "ALB target response time (s)",
                [alb_metric("TargetResponseTime", "p50", inputs), alb_metric("TargetResponseTime", "p99", inputs)],
                width=6,
            ),
            _graph(
                "Healthy targets per target group",
                [cw.MathExpression(expression=healthy_hosts_query(inputs, True), using_metrics={}, period=PERIOD)],
                width=6,
            ),
        ]
    )
    rows.append([_graph("Cost per 1,000 images (USD)", [cost_per_1000_images(a, inputs) for a in accs], width=24)])
    if inputs.routing_weights:
        # The weights beside what they act on: where requests went and the pods that served them.
        rows.append(
            [
                _graph(
                    "Routing weight (of 100)",
                    [service_metric(a, sm.ROUTING_WEIGHT, "Average") for a in accs],
                    unit="weight",
                ),
                _graph("Requests per minute", [service_metric(a, sm.REQUESTS, "Sum") for a in accs], unit="requests"),
                _graph("Running pods", [running_pods(a, inputs) for a in accs], unit="pods"),
            ]
        )
    if inputs.jobs is not None:
        rows.append(jobs_row(inputs, inputs.jobs))
    return rows


def _header(inputs: DashboardInputs) -> str:
    names = ", ".join(f"`{a.deployment_name}`" for a in inputs.accelerators)
    return (
        f"# Stable Diffusion serving\nDeployments: {names}. Service metrics from `{sm.NAMESPACE}`; "
        "pods and utilization from Container Insights; ALB metrics from the Ingress' load balancer."
    )


class ServingDashboard(Construct):
    """The CloudWatch dashboard built from `dashboard_rows`."""

    def __init__(self, scope: Construct, construct_id: str, *, inputs: DashboardInputs, name: str) -> None:
        super().__init__(scope, construct_id)
        self.rows = dashboard_rows(inputs)
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=name, widgets=self.rows)
