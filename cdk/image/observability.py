"""The image service on the dashboard and in the alarms: requests, latency, errors, queue and batch per
accelerator, pods and accelerator utilization, cost per 1,000 images, routing weights and the job queue;
alarms on p99 latency per accelerator over the SLO, an accelerator kept at routing weight 0 for too long
(cost-with-failover), the job queue's dead letters and its oldest job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import aws_cloudwatch as cw

from cdk.accelerators import Accelerator
from cdk.config.serving import ServingConfig
from cdk.image.metrics import image_unit
from cdk.image.workload import deployment_name
from cdk.observability import service_metrics as sm
from cdk.observability.sections import AlarmSection, AlarmSpec, DashboardRow, DashboardSection, DashboardView, Observed
from cdk.observability.widgets import (
    CONTAINER_INSIGHTS,
    PERIOD,
    cost_per_output,
    graph,
    running_pods,
    service_metric,
    sqs_metric,
)
from common import metric_names


@dataclass(frozen=True)
class JobQueues:
    """The job queue and its dead-letter queue, by their SQS names (the metrics' QueueName)."""

    queue_name: str
    dead_letter_queue_name: str


@dataclass(frozen=True)
class ImageObservability(Observed):
    """The image service's dashboard rows and alarms."""

    accelerators: Sequence[Accelerator]
    price_per_hour: Mapping[str, float]  # accelerator name -> USD per hour of one replica's instance
    jobs: JobQueues | None = None

    def dashboard(self, view: DashboardView) -> DashboardSection:
        """Requests, latency, errors, queue and batch, pods and utilization; below the front door's rows: cost,
        routing weights and the job queue."""
        accs = list(self.accelerators)
        latency = [service_metric(image_unit(a), sm.LATENCY, s) for a in accs for s in ("p50", "p90", "p99")]
        rows: list[list[cw.IWidget]] = [
            [cw.TextWidget(markdown=self.header(), width=24, height=2)],
            [
                graph(
                    "Requests per minute",
                    [service_metric(image_unit(a), sm.REQUESTS, "Sum") for a in accs],
                    unit="requests",
                ),
                graph("Latency p50 / p90 / p99 (ms)", latency, unit="ms"),
                graph(
                    "Errors (5xx) per minute",
                    [service_metric(image_unit(a), sm.ERRORS, "Sum") for a in accs],
                    unit="errors",
                ),
            ],
            [
                graph("Queue depth (max)", [service_metric(image_unit(a), sm.QUEUE_DEPTH, "Maximum") for a in accs]),
                graph("Batch size (average)", [service_metric(image_unit(a), sm.BATCH_SIZE, "Average") for a in accs]),
                graph(
                    "Images per minute",
                    [service_metric(image_unit(a), sm.IMAGES_GENERATED, "Sum") for a in accs],
                    unit="images",
                ),
            ],
        ]
        utilization = [
            cw.Metric(
                namespace=CONTAINER_INSIGHTS,
                metric_name=a.utilization_metric,
                dimensions_map={"ClusterName": view.cluster_name},
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
                graph("Running pods", [self.pods(a, view) for a in accs], width=12, unit="pods"),
                graph(f"Accelerator utilization ({utilization_units}, %)", utilization, width=12, unit="%"),
            ]
        )
        tail: list[DashboardRow] = [
            [graph("Cost per 1,000 images (USD)", [self.cost_per_1000_images(a, view) for a in accs], width=24)]
        ]
        if view.routing_weights:
            # The weights beside what they act on: where requests went and the pods that served them.
            tail.append(
                [
                    graph(
                        "Routing weight (of 100)",
                        [service_metric(image_unit(a), sm.ROUTING_WEIGHT, "Average") for a in accs],
                        unit="weight",
                    ),
                    graph(
                        "Requests per minute",
                        [service_metric(image_unit(a), sm.REQUESTS, "Sum") for a in accs],
                        unit="requests",
                    ),
                    graph("Running pods", [self.pods(a, view) for a in accs], unit="pods"),
                ]
            )
        if self.jobs is not None:
            tail.append(self.jobs_row(self.jobs))
        return DashboardSection(head=rows, tail=tail)

    def header(self) -> str:
        """The section's title: the Deployments it shows and where their metrics come from."""
        names = ", ".join(f"`{deployment_name(a)}`" for a in self.accelerators)
        return (
            f"# Stable Diffusion serving\nDeployments: {names}. Service metrics from `{sm.NAMESPACE}`; "
            "pods and utilization from Container Insights; ALB metrics from the Ingress' load balancer."
        )

    def pods(self, acc: Accelerator, view: DashboardView) -> cw.Metric:
        """Container Insights' running pods behind the image service on `acc`."""
        return running_pods(image_unit(acc), view.cluster_name, view.namespace)

    def jobs_row(self, queues: JobQueues) -> list[cw.IWidget]:
        """Queue depth, age of the oldest job, jobs finished and failed per minute, dead-letter depth."""
        accs = list(self.accelerators)
        finished = [service_metric(image_unit(a), sm.JOBS_SUCCEEDED, "Sum") for a in accs]
        failed = [service_metric(image_unit(a), sm.JOBS_FAILED, "Sum") for a in accs]
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

    def cost_per_1000_images(self, acc: Accelerator, view: DashboardView) -> cw.MathExpression:
        """USD per 1,000 images on `acc` (see `cost_per_output`)."""
        return cost_per_output(
            image_unit(acc),
            cluster_name=view.cluster_name,
            namespace=view.namespace,
            price_per_hour=self.price_per_hour[acc.name],
            output_metric=sm.IMAGES_GENERATED,
            output_id="images",
            per=1000,
            per_label="1000 images",
        )

    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """p99 latency per accelerator and zero routing weight (cost-with-failover); then the job queue's alarms."""
        periods = cfg.alarm_evaluation_periods
        head = [self.latency_alarm(acc, cfg, periods) for acc in self.accelerators]
        if view.routing_weights:
            head += [self.zero_weight_alarm(acc, cfg) for acc in self.accelerators]
        tail = self.job_alarms(self.jobs, cfg, periods) if self.jobs is not None else []
        return AlarmSection(head=head, tail=tail)

    def zero_weight_alarm(self, acc: Accelerator, cfg: ServingConfig) -> AlarmSpec:
        """The routing controller has kept an accelerator out of rotation for longer than configured."""
        minutes = cfg.routing_controller.zero_weight_alarm_minutes
        return AlarmSpec(
            f"ZeroWeight{acc.name.capitalize()}",
            service_metric(image_unit(acc), sm.ROUTING_WEIGHT, "Maximum"),
            alarm_description=(
                f"The routing controller has sent no traffic to {deployment_name(acc)} for {minutes} minutes: "
                "it has no ready pod (see the Ingress' RoutingWeightsChanged events and its NodeClaims)."
            ),
            threshold=1,
            evaluation_periods=minutes,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No data means no controller running, not an accelerator out of rotation.
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def latency_alarm(self, acc: Accelerator, cfg: ServingConfig, periods: int) -> AlarmSpec:
        """p99 latency on `acc` above the SLO (alarmLatencyP99Ms)."""
        return AlarmSpec(
            f"LatencyP99{acc.name.capitalize()}",
            service_metric(image_unit(acc), sm.LATENCY, "p99"),
            alarm_description=(
                f"p99 latency of {deployment_name(acc)} is above the SLO of {cfg.alarm_latency_p99_ms:g} ms."
            ),
            threshold=cfg.alarm_latency_p99_ms,
            evaluation_periods=periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def job_alarms(self, queues: JobQueues, cfg: ServingConfig, periods: int) -> list[AlarmSpec]:
        """Any dead-lettered job (at once), and a job waiting longer than alarmJobAgeSeconds."""
        # The pods receive each dead letter to fail and announce its job, then delete it: count the
        # receives, since the queue's depth is back to 0 within a poll.
        dead = sqs_metric(queues.dead_letter_queue_name, metric_names.SQS_RECEIVED, "dead-lettered jobs", "Sum")
        oldest = sqs_metric(queues.queue_name, metric_names.SQS_OLDEST_AGE, "oldest job")
        return [
            AlarmSpec(
                "JobsDeadLettered",
                dead,
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
            AlarmSpec(
                "JobsWaitingTooLong",
                oldest,
                alarm_description=(
                    f"The oldest job has waited more than {cfg.jobs.alarm_oldest_age_s} s: the pools cannot "
                    "keep up (max replicas, node capacity) or no pod takes jobs."
                ),
                threshold=cfg.jobs.alarm_oldest_age_s,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        ]
