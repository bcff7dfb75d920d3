"""What a workload shows: its dashboard rows and its alarms, as the deployment's one dashboard and alarm set
(cdk/observability/dashboard.py, alarms.py) collect them. Workloads implement `Observed` (through the chassis's
`Workload` contract); the dashboard and alarms know nothing else of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from cdk.config.serving import ServingConfig

DashboardRow = list[cw.IWidget]


@dataclass(frozen=True)
class DashboardView:
    """What a workload's dashboard rows and alarms may refer to besides their own Deployments."""

    cluster_name: str
    namespace: str
    load_balancer: str  # the ALB's `app/<name>/<id>` metric dimension
    routing_weights: bool  # a routing controller publishes RoutingWeight (cost-with-failover)


@dataclass(frozen=True)
class DashboardSection:
    """A workload's rows: `head` above the front door's rows (live service health), `tail` below (cost, detail)."""

    head: Sequence[DashboardRow] = ()
    tail: Sequence[DashboardRow] = field(default=())


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm on a metric, as `IMetric.create_alarm` takes it; the stack creates it under id `cid`."""

    cid: str
    metric: cw.IMetric
    alarm_description: str
    threshold: float
    evaluation_periods: int
    comparison_operator: cw.ComparisonOperator
    treat_missing_data: cw.TreatMissingData

    def create(self, scope: Construct) -> cw.Alarm:
        """The alarm, in `scope`."""
        return self.metric.create_alarm(
            scope,
            self.cid,
            alarm_description=self.alarm_description,
            threshold=self.threshold,
            evaluation_periods=self.evaluation_periods,
            comparison_operator=self.comparison_operator,
            treat_missing_data=self.treat_missing_data,
        )


@dataclass(frozen=True)
class AlarmSection:
    """A workload's alarms: `head` beside the front door's request alarm, `tail` after its target alarm."""

    head: Sequence[AlarmSpec] = ()
    tail: Sequence[AlarmSpec] = field(default=())


class Observed(ABC):
    """What shows a workload on the dashboard and raises its alarms."""

    @abstractmethod
    def dashboard(self, view: DashboardView) -> DashboardSection:
        """Its dashboard rows."""

    @abstractmethod
    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """Its alarms (ids of their own: the stack creates them all in one construct)."""
