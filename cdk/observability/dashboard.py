"""The serving dashboard: every workload's rows around the front door's (the load balancer's).

Each workload's `DashboardSection` has a head (live service health) and a tail (cost and detail); the
dashboard shows every head in the workloads' order, then the load balancer's row, then every tail.
Widget definitions are built by `dashboard_rows` (CDK widget objects) so the same list feeds the
Dashboard construct and the offline layout picture in docs/.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from cdk.observability.sections import DashboardRow, DashboardView, Observed
from cdk.observability.widgets import PERIOD, graph

ALB_NAMESPACE: Final = "AWS/ApplicationELB"


def alb_metric(name: str, statistic: str, view: DashboardView) -> cw.Metric:
    """An ALB-level metric of the load balancer the Ingress created."""
    return cw.Metric(
        namespace=ALB_NAMESPACE,
        metric_name=name,
        dimensions_map={"LoadBalancer": view.load_balancer},
        statistic=statistic,
        period=PERIOD,
        label=name,
    )


def healthy_hosts_query(view: DashboardView, group_by_target_group: bool) -> str:
    """Metrics Insights: the minimum healthy host count over this ALB's target groups."""
    # A CloudWatch Metrics Insights query, not a database: the value is the ALB's own dimension.
    query = (
        f'SELECT MIN(HealthyHostCount) FROM SCHEMA("{ALB_NAMESPACE}", LoadBalancer, TargetGroup) '  # noqa: S608
        f"WHERE LoadBalancer = '{view.load_balancer}'"
    )
    return query + (" GROUP BY TargetGroup" if group_by_target_group else "")


def front_door_rows(view: DashboardView) -> list[DashboardRow]:
    """The load balancer's row: requests, 4xx / 5xx, target response time, healthy targets per target group."""
    return [
        [
            graph("ALB requests per minute", [alb_metric("RequestCount", "Sum", view)], width=6),
            graph(
                "ALB 4xx / 5xx per minute",
                [
                    alb_metric("HTTPCode_Target_4XX_Count", "Sum", view),
                    alb_metric("HTTPCode_Target_5XX_Count", "Sum", view),
                    alb_metric("HTTPCode_ELB_5XX_Count", "Sum", view),
                ],
                width=6,
            ),
            graph(
                "ALB target response time (s)",
                [alb_metric("TargetResponseTime", "p50", view), alb_metric("TargetResponseTime", "p99", view)],
                width=6,
            ),
            graph(
                "Healthy targets per target group",
                [cw.MathExpression(expression=healthy_hosts_query(view, True), using_metrics={}, period=PERIOD)],
                width=6,
            ),
        ]
    ]


def dashboard_rows(view: DashboardView, workloads: Sequence[Observed]) -> list[DashboardRow]:
    """The dashboard, row by row."""
    sections = [w.dashboard(view) for w in workloads]
    rows: list[DashboardRow] = [row for s in sections for row in s.head]
    rows += front_door_rows(view)
    rows += [row for s in sections for row in s.tail]
    return rows


class ServingDashboard(Construct):
    """The CloudWatch dashboard built from `dashboard_rows`."""

    def __init__(
        self, scope: Construct, construct_id: str, *, view: DashboardView, workloads: Sequence[Observed], name: str
    ) -> None:
        super().__init__(scope, construct_id)
        self.rows = dashboard_rows(view, workloads)
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=name, widgets=self.rows)
