"""The serving dashboard: service metrics per accelerator, pods and accelerator utilization, ALB, cost, and
(when the stack serves a language model) the LLM section of llm_dashboard.py.

Widget definitions are built by `dashboard_rows` (CDK widget objects) so the same list feeds the
Dashboard construct and the offline layout picture in docs/.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from cdk.accelerators import Accelerator
from cdk.observability import service_metrics as sm
from cdk.observability.llm_dashboard import LlmDashboardInputs, llm_rows
from cdk.observability.widgets import (
    CONTAINER_INSIGHTS,
    PERIOD,
    cost_per_output,
    graph,
    running_pods,
    service_metric,
)
from common import metric_names

ALB_NAMESPACE: Final = "AWS/ApplicationELB"


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
    llm: LlmDashboardInputs | None = None  # the LLM workload's deployment units, when it is enabled


def image_pods(acc: Accelerator, inputs: DashboardInputs) -> cw.Metric:
    """Container Insights' running pods behind the image service on `acc`."""
    return running_pods(sm.image_unit(acc), inputs.cluster_name, inputs.namespace)


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
    finished = [service_metric(sm.image_unit(a), sm.JOBS_SUCCEEDED, "Sum") for a in accs]
    failed = [service_metric(sm.image_unit(a), sm.JOBS_FAILED, "Sum") for a in accs]
    return [
        graph(
            "Job queue depth",
            [
                sqs_metric(queues.queue_name, metric_names.SQS_VISIBLE, "waiting"),
                sqs_metric(queues.queue_name, metric_names.SQS_NOT_VISIBLE, "running"),
            ],
            width=6,
            unit="jobs",
        ),
        graph(
            "Age of the oldest job (s)",
            [sqs_metric(queues.queue_name, metric_names.SQS_OLDEST_AGE, "oldest job")],
            width=6,
            unit="s",
        ),
        graph("Jobs finished / failed per minute", finished + failed, width=6, unit="jobs"),
        graph(
            "Dead-letter queue depth",
            [sqs_metric(queues.dead_letter_queue_name, metric_names.SQS_VISIBLE, "dead-lettered jobs")],
            width=6,
            unit="jobs",
        ),
    ]


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
    """USD per 1,000 images on `acc` (see `cost_per_output`)."""
    return cost_per_output(
        sm.image_unit(acc),
        cluster_name=inputs.cluster_name,
        namespace=inputs.namespace,
        price_per_hour=inputs.price_per_hour[acc.name],
        output_metric=sm.IMAGES_GENERATED,
        output_id="images",
        per=1000,
        per_label="1000 images",
    )


def dashboard_rows(inputs: DashboardInputs) -> list[list[cw.IWidget]]:
    """The dashboard, row by row."""
    accs = list(inputs.accelerators)
    latency = [service_metric(sm.image_unit(a), sm.LATENCY, s) for a in accs for s in ("p50", "p90", "p99")]
    rows: list[list[cw.IWidget]] = [
        [cw.TextWidget(markdown=_header(inputs), width=24, height=2)],
        [
            graph(
                "Requests per minute",
                [service_metric(sm.image_unit(a), sm.REQUESTS, "Sum") for a in accs],
                unit="requests",
            ),
            graph("Latency p50 / p90 / p99 (ms)", latency, unit="ms"),
            graph(
                "Errors (5xx) per minute",
                [service_metric(sm.image_unit(a), sm.ERRORS, "Sum") for a in accs],
                unit="errors",
            ),
        ],
        [
            graph("Queue depth (max)", [service_metric(sm.image_unit(a), sm.QUEUE_DEPTH, "Maximum") for a in accs]),
            graph("Batch size (average)", [service_metric(sm.image_unit(a), sm.BATCH_SIZE, "Average") for a in accs]),
            graph(
                "Images per minute",
                [service_metric(sm.image_unit(a), sm.IMAGES_GENERATED, "Sum") for a in accs],
                unit="images",
            ),
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
            graph("Running pods", [image_pods(a, inputs) for a in accs], width=12, unit="pods"),
            graph(f"Accelerator utilization ({utilization_units}, %)", utilization, width=12, unit="%"),
        ]
    )
    rows.append(
        [
            graph("ALB requests per minute", [alb_metric("RequestCount", "Sum", inputs)], width=6),
            graph(
                "ALB 4xx / 5xx per minute",
                [
                    alb_metric("HTTPCode_Target_4XX_Count", "Sum", inputs),
                    alb_metric("HTTPCode_Target_5XX_Count", "Sum", inputs),
                    alb_metric("HTTPCode_ELB_5XX_Count", "Sum", inputs),
                ],
                width=6,
            ),
            graph(
                "ALB target response time (s)",
                [alb_metric("TargetResponseTime", "p50", inputs), alb_metric("TargetResponseTime", "p99", inputs)],
                width=6,
            ),
            graph(
                "Healthy targets per target group",
                [cw.MathExpression(expression=healthy_hosts_query(inputs, True), using_metrics={}, period=PERIOD)],
                width=6,
            ),
        ]
    )
    rows.append([graph("Cost per 1,000 images (USD)", [cost_per_1000_images(a, inputs) for a in accs], width=24)])
    if inputs.routing_weights:
        # The weights beside what they act on: where requests went and the pods that served them.
        rows.append(
            [
                graph(
                    "Routing weight (of 100)",
                    [service_metric(sm.image_unit(a), sm.ROUTING_WEIGHT, "Average") for a in accs],
                    unit="weight",
                ),
                graph(
                    "Requests per minute",
                    [service_metric(sm.image_unit(a), sm.REQUESTS, "Sum") for a in accs],
                    unit="requests",
                ),
                graph("Running pods", [image_pods(a, inputs) for a in accs], unit="pods"),
            ]
        )
    if inputs.jobs is not None:
        rows.append(jobs_row(inputs, inputs.jobs))
    if inputs.llm is not None:
        rows += llm_rows(inputs.llm, inputs.cluster_name)
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
