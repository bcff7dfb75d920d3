"""The LLM workload's dashboard section and alarms: what the LLM gateway publishes per accelerator, and its cost.

Time to first token and inter-token latency (p50/p90), tokens per second, requests and errors, vLLM's
queue, KV cache and prefix-cache hit rate, running pods, and the cost per million output tokens. Every series is
a metric the gateway publishes (common.metric_names.LLM_METRICS) for an LLM deployment unit (cdk/llm/names.py), or
Container Insights' pods behind its Service. Alarms: each LLM deployment unit's TTFT p90 and error rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_cloudwatch as cw

from cdk.accelerators import ACCELERATORS, Accelerator
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm import names
from cdk.observability import service_metrics as sm
from cdk.observability.sections import AlarmSection, AlarmSpec, DashboardSection, DashboardView, Observed
from cdk.observability.widgets import PERIOD, cost_per_output, graph, percent_of, running_pods, service_metric
from common import metric_names

# The percentiles the issue asks for: the typical request and the slow tail short of outliers.
PERCENTILES = ("p50", "p90")
# The LLM gateway's own (llm_gateway/metrics_bridge.py says what each means).
PROMPT_TOKENS = metric_names.PROMPT_TOKENS.name
OUTPUT_TOKENS = metric_names.OUTPUT_TOKENS.name
TIME_TO_FIRST_TOKEN = metric_names.TIME_TO_FIRST_TOKEN.name
TIME_PER_OUTPUT_TOKEN = metric_names.TIME_PER_OUTPUT_TOKEN.name
REQUESTS_RUNNING = metric_names.REQUESTS_RUNNING.name
KV_CACHE_USAGE = metric_names.KV_CACHE_USAGE.name
PREFIX_CACHE_QUERIES = metric_names.PREFIX_CACHE_QUERIES.name
PREFIX_CACHE_HITS = metric_names.PREFIX_CACHE_HITS.name


@dataclass(frozen=True)
class LlmUnit:
    """The LLM Deployment on one accelerator."""

    accelerator: Accelerator
    deployment_name: str  # its DeploymentUnit dimension, Deployment and Service (cdk/llm/names.py)
    price_per_hour: float  # USD per hour of one replica's instance (llmInstanceType<Acc>'s, or llmPricePerHour<Acc>)

    @property
    def unit(self) -> sm.DeploymentUnit:
        """The deployment unit its gateway publishes as."""
        return sm.DeploymentUnit(self.deployment_name, self.accelerator)


@dataclass(frozen=True)
class LlmDashboardInputs(Observed):
    """What the LLM section and alarms need from the stacks."""

    served_model_name: str
    namespace: str  # the Kubernetes namespace of the LLM Services (Container Insights' Namespace)
    units: Sequence[LlmUnit]
    alarm_ttft_p90_ms: float  # alarmTtftP90Ms

    @classmethod
    def from_config(cls, cfg: LlmConfig, namespace: str) -> LlmDashboardInputs:
        """The inputs for the accelerators `cfg` serves the model on, named as cdk/llm/names.py names them."""
        accelerators = [ACCELERATORS[name] for name in cfg.accelerators]
        return cls(
            served_model_name=cfg.served_model_name,
            namespace=namespace,
            units=[
                LlmUnit(acc, names.deployment_name(acc), cfg.per_accelerator[acc.name].price_per_hour)
                for acc in accelerators
            ],
            alarm_ttft_p90_ms=cfg.alarm_ttft_p90_ms,
        )

    def dashboard(self, view: DashboardView) -> DashboardSection:
        """The LLM section, below the front door's rows."""
        return DashboardSection(tail=llm_rows(self, view.cluster_name))

    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """TTFT p90 and error rate per LLM deployment unit, after the front door's alarms."""
        periods = cfg.alarm_evaluation_periods
        return AlarmSection(tail=[alarm for unit in self.units for alarm in self.unit_alarms(unit, cfg, periods)])

    def unit_alarms(self, llm_unit: LlmUnit, config: ServingConfig, periods: int) -> list[AlarmSpec]:
        """TTFT p90 above alarmTtftP90Ms, and the share of failed requests above alarm5xxRatePercent.

        The gateway counts a stream that ended in an error event as an error, though its status line was a 200:
        the ALB's 5xx alarm does not see those.
        """
        unit, suffix = llm_unit.unit, llm_unit.accelerator.name.capitalize()
        ttft = service_metric(unit, TIME_TO_FIRST_TOKEN, "p90")
        return [
            AlarmSpec(
                f"LlmTtftP90{suffix}",
                ttft,
                alarm_description=(
                    f"p90 time to first token of {unit.name} is above {self.alarm_ttft_p90_ms:g} ms (alarmTtftP90Ms): "
                    "requests wait in vLLM's queue (see the dashboard's queue and KV cache) or a pod is slow."
                ),
                threshold=self.alarm_ttft_p90_ms,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                # Only completed streams have a TTFT: no streams, nothing to judge.
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            AlarmSpec(
                f"LlmErrorRate{suffix}",
                error_rate(unit),
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


def error_rate(unit: sm.DeploymentUnit) -> cw.MathExpression:
    """The share of the unit's requests that ended in a server failure (Errors / Requests), in %."""
    acc = unit.accelerator.name
    return percent_of(
        {f"errors_{acc}": service_metric(unit, sm.ERRORS, "Sum")},
        f"requests_{acc}",
        service_metric(unit, sm.REQUESTS, "Sum"),
        label=f"{unit.name} error %",
    )


def prefix_cache_hit_rate(unit: sm.DeploymentUnit) -> cw.MathExpression:
    """The share of prompt tokens vLLM found in its prefix cache (PrefixCacheHits / PrefixCacheQueries), in %: the
    whole period's tokens, not a mean of per-pod rates. An engine serving without prefix caching looks nothing up
    (0 %); docs/llm-serving.md says where it is on."""
    acc = unit.accelerator.name
    return percent_of(
        {f"hits_{acc}": service_metric(unit, PREFIX_CACHE_HITS, "Sum")},
        f"lookups_{acc}",
        service_metric(unit, PREFIX_CACHE_QUERIES, "Sum"),
        label=f"{unit.name} prefix cache hit %",
    )


def tokens_per_second(unit: sm.DeploymentUnit, metric: str, label: str) -> cw.MathExpression:
    """A token counter's Sum per period divided by the period's seconds (metric math PERIOD())."""
    metric_id = f"{label}_{unit.accelerator.name}"
    return cw.MathExpression(
        expression=f"{metric_id} / PERIOD({metric_id})",
        using_metrics={metric_id: service_metric(unit, metric, "Sum")},
        period=PERIOD,
        label=f"{unit.name} {label} tokens/s",
    )


def llm_rows(llm: LlmDashboardInputs, cluster_name: str) -> list[list[cw.IWidget]]:
    """The LLM section, row by row."""
    units = [u.unit for u in llm.units]

    def each(metric: str, statistics: Sequence[str]) -> list[cw.IMetric]:
        return [service_metric(u, metric, s) for u in units for s in statistics]

    tokens = [tokens_per_second(u, OUTPUT_TOKENS, "output") for u in units]
    tokens += [tokens_per_second(u, PROMPT_TOKENS, "prompt") for u in units]
    cost = [
        cost_per_output(
            lu.unit,
            cluster_name=cluster_name,
            namespace=llm.namespace,
            price_per_hour=lu.price_per_hour,
            output_metric=OUTPUT_TOKENS,
            output_id="tokens",
            per=1_000_000,
            per_label="1M output tokens",
        )
        for lu in llm.units
    ]
    return [
        [cw.TextWidget(markdown=_header(llm), width=24, height=2)],
        [
            graph("Time to first token p50 / p90 (ms)", each(TIME_TO_FIRST_TOKEN, PERCENTILES), width=6, unit="ms"),
            graph(
                "Inter-token latency p50 / p90 (ms, per-request mean)",
                each(TIME_PER_OUTPUT_TOKEN, PERCENTILES),
                width=6,
                unit="ms",
            ),
            graph("LLM request latency p50 / p90 (ms)", each(sm.LATENCY, PERCENTILES), width=6, unit="ms"),
            graph("Tokens per second (output / prompt)", tokens, width=6, unit="tokens/s"),
        ],
        [
            graph("LLM requests / errors per minute", each(sm.REQUESTS, ["Sum"]) + each(sm.ERRORS, ["Sum"]), width=6),
            graph("LLM error rate (%)", [error_rate(u) for u in units], width=6, unit="%"),
            graph(
                "vLLM queue / running (max)",
                each(sm.QUEUE_DEPTH, ["Maximum"]) + each(REQUESTS_RUNNING, ["Maximum"]),
                width=6,
                unit="requests",
            ),
            graph("KV cache use (%)", each(KV_CACHE_USAGE, ["Average", "Maximum"]), width=6, unit="%"),
        ],
        [
            graph(
                "LLM running pods", [running_pods(u, cluster_name, llm.namespace) for u in units], width=6, unit="pods"
            ),
            graph(
                "Prefix cache hit rate (% of prompt tokens)",
                [prefix_cache_hit_rate(u) for u in units],
                width=6,
                unit="%",
            ),
            graph("Cost per million output tokens (USD)", cost, width=12, unit="USD"),
        ],
    ]


def _header(llm: LlmDashboardInputs) -> str:
    deployments = ", ".join(f"`{u.deployment_name}`" for u in llm.units)
    return (
        f"# LLM serving: `{llm.served_model_name}`\nDeployments: {deployments}. Metrics from the LLM gateway in "
        f"`{sm.NAMESPACE}`; inter-token latency is each streamed request's mean time per token after its first; "
        "cost counts each running pod as one instance of llmInstanceType at its price."
    )
