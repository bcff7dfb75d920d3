"""Alarms: the load balancer's (ALB 5xx rate, no healthy targets) and every workload's own (`Observed.alarms`:
its head after the 5xx rate, its tail after the healthy targets), all notifying the alarm topic if one is set."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdk.config.serving import ServingConfig
from cdk.observability.dashboard import alb_metric, healthy_hosts_query
from cdk.observability.sections import DashboardView, Observed
from cdk.observability.widgets import percent_of


class ServingAlarms(Construct):
    """The load balancer's alarms and every workload's, notifying the SNS topic of alarmTopicArn if set."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        view: DashboardView,
        workloads: Sequence[Observed],
        config: ServingConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        periods = config.alarm_evaluation_periods
        self.alarms: list[cw.Alarm] = []
        five_xx = percent_of(
            {
                "t5xx": alb_metric("HTTPCode_Target_5XX_Count", "Sum", view),
                "e5xx": alb_metric("HTTPCode_ELB_5XX_Count", "Sum", view),
            },
            "req",
            alb_metric("RequestCount", "Sum", view),
            label="5xx %",
        )
        self.alarms.append(
            five_xx.create_alarm(
                self,
                "Alb5xxRate",
                alarm_description=f"More than {config.alarm_5xx_rate_percent:g}% of ALB responses are 5xx.",
                threshold=config.alarm_5xx_rate_percent,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
        )
        sections = [w.alarms(view, config) for w in workloads]
        self.alarms += [spec.create(self) for s in sections for spec in s.head]
        healthy = cw.MathExpression(
            expression=healthy_hosts_query(view, False), using_metrics={}, period=Duration.minutes(1)
        )
        self.alarms.append(
            healthy.create_alarm(
                self,
                "NoHealthyTargets",
                alarm_description=(
                    "A target group of the serving ALB has no healthy targets (minimum over its target groups); "
                    "the dashboard's 'Healthy targets per target group' widget shows which."
                ),
                threshold=1,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                # No data at all means no target group reports: treat as unhealthy.
                treat_missing_data=cw.TreatMissingData.BREACHING,
            )
        )
        self.alarms += [spec.create(self) for s in sections for spec in s.tail]
        if config.alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "Topic", config.alarm_topic_arn)
            for alarm in self.alarms:
                alarm.add_alarm_action(cw_actions.SnsAction(topic))
                alarm.add_ok_action(cw_actions.SnsAction(topic))
