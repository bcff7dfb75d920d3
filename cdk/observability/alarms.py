"""Alarms: ALB 5xx rate, p99 latency per accelerator over the SLO, no healthy targets, (cost-with-failover)
an accelerator kept at routing weight 0 for too long, the job queue's dead letters and oldest job, and (with
the LLM workload) each LLM deployment unit's TTFT p90 and error rate."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdk.accelerators import Accelerator
from cdk.config.serving import ServingConfig
from cdk.observability import service_metrics as sm
from cdk.observability.dashboard import DashboardInputs, JobQueues, alb_metric, healthy_hosts_query, sqs_metric
from cdk.observability.llm_dashboard import LlmDashboardInputs, LlmUnit, error_rate
from cdk.observability.widgets import percent_of, service_metric
from common import metric_names


class ServingAlarms(Construct):
    """The alarms, optionally notifying an SNS topic from config (alarmTopicArn)."""

    def __init__(self, scope: Construct, construct_id: str, *, inputs: DashboardInputs, config: ServingConfig) -> None:
        super().__init__(scope, construct_id)
        periods = config.alarm_evaluation_periods
        self.alarms: list[cw.Alarm] = []
        five_xx = percent_of(
            {
                "t5xx": alb_metric("HTTPCode_Target_5XX_Count", "Sum", inputs),
                "e5xx": alb_metric("HTTPCode_ELB_5XX_Count", "Sum", inputs),
            },
            "req",
            alb_metric("RequestCount", "Sum", inputs),
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
        for acc in inputs.accelerators:
            self.alarms.append(self._latency_alarm(acc, config, periods))
        if inputs.routing_weights:
            for acc in inputs.accelerators:
                self.alarms.append(self._zero_weight_alarm(acc, config))
        healthy = cw.MathExpression(
            expression=healthy_hosts_query(inputs, False), using_metrics={}, period=Duration.minutes(1)
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
        if inputs.jobs is not None:
            self.alarms += self._job_alarms(inputs.jobs, config, periods)
        if inputs.llm is not None:
            for unit in inputs.llm.units:
                self.alarms += self._llm_alarms(unit, inputs.llm, config, periods)
        if config.alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "Topic", config.alarm_topic_arn)
            for alarm in self.alarms:
                alarm.add_alarm_action(cw_actions.SnsAction(topic))
                alarm.add_ok_action(cw_actions.SnsAction(topic))

    def _zero_weight_alarm(self, acc: Accelerator, config: ServingConfig) -> cw.Alarm:
        """The routing controller has kept an accelerator out of rotation for longer than configured."""
        minutes = config.routing_controller.zero_weight_alarm_minutes
        return service_metric(sm.image_unit(acc), sm.ROUTING_WEIGHT, "Maximum").create_alarm(
            self,
            f"ZeroWeight{acc.name.capitalize()}",
            alarm_description=(
                f"The routing controller has sent no traffic to {acc.deployment_name} for {minutes} minutes: "
                "it has no ready pod (see the Ingress' RoutingWeightsChanged events and its NodeClaims)."
            ),
            threshold=1,
            evaluation_periods=minutes,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No data means no controller running, not an accelerator out of rotation.
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _latency_alarm(self, acc: Accelerator, config: ServingConfig, periods: int) -> cw.Alarm:
        return service_metric(sm.image_unit(acc), sm.LATENCY, "p99").create_alarm(
            self,
            f"LatencyP99{acc.name.capitalize()}",
            alarm_description=(
                f"p99 latency of {acc.deployment_name} is above the SLO of {config.alarm_latency_p99_ms:g} ms."
            ),
            threshold=config.alarm_latency_p99_ms,
            evaluation_periods=periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _llm_alarms(
        self, llm_unit: LlmUnit, llm: LlmDashboardInputs, config: ServingConfig, periods: int
    ) -> list[cw.Alarm]:
        """TTFT p90 above alarmTtftP90Ms, and the share of failed requests above alarm5xxRatePercent.

        The gateway counts a stream that ended in an error event as an error, though its status line was a 200:
        the ALB's 5xx alarm does not see those.
        """
        unit, suffix = llm_unit.unit, llm_unit.accelerator.name.capitalize()
        ttft = service_metric(unit, sm.TIME_TO_FIRST_TOKEN, "p90")
        return [
            ttft.create_alarm(
                self,
                f"LlmTtftP90{suffix}",
                alarm_description=(
                    f"p90 time to first token of {unit.name} is above {llm.alarm_ttft_p90_ms:g} ms (alarmTtftP90Ms): "
                    "requests wait in vLLM's queue (see the dashboard's queue and KV cache) or a pod is slow."
                ),
                threshold=llm.alarm_ttft_p90_ms,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                # Only completed streams have a TTFT: no streams, nothing to judge.
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            error_rate(unit).create_alarm(
                self,
                f"LlmErrorRate{suffix}",
                alarm_description=(
                    f"More than {config.alarm_5xx_rate_percent:g}% of {unit.name}'s requests failed "
                    "(a 5xx, or a stream cut or ended by an engine error); the gateway's log names each."
                ),
                threshold=config.alarm_5xx_rate_percent,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        ]

    def _job_alarms(self, queues: JobQueues, config: ServingConfig, periods: int) -> list[cw.Alarm]:
        """Any dead-lettered job (at once), and a job waiting longer than alarmJobAgeSeconds."""
        # The pods receive each dead letter to fail and announce its job, then delete it: count the
        # receives, since the queue's depth is back to 0 within a poll.
        dead = sqs_metric(queues.dead_letter_queue_name, metric_names.SQS_RECEIVED, "dead-lettered jobs", "Sum")
        oldest = sqs_metric(queues.queue_name, metric_names.SQS_OLDEST_AGE, "oldest job")
        return [
            dead.create_alarm(
                self,
                "JobsDeadLettered",
                alarm_description=(
                    "The job queue gave up on a job (delivered jobsMaxReceives x 10 times, at least 100, without "
                    "finishing): a pod failed and announced it; the pods' log line 'a job was dead-lettered' names it."
                ),
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                # SQS stops publishing for a queue that has been idle for hours: an empty DLQ.
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            oldest.create_alarm(
                self,
                "JobsWaitingTooLong",
                alarm_description=(
                    f"The oldest job has waited more than {config.jobs.alarm_oldest_age_s} s: the pools cannot "
                    "keep up (max replicas, node capacity) or no pod takes jobs."
                ),
                threshold=config.jobs.alarm_oldest_age_s,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        ]
