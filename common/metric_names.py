"""The platform's CloudWatch metric contract.

The image service and the LLM gateway publish these metrics and the CDK stacks build dashboards,
alarms and KEDA ScaledObjects from them. All sides import this module, so a rename cannot drift apart.
It must stay free of heavy imports: the CDK app imports it at synth time, and the routing controller
imports it on its small image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NAMESPACE: Final = "StableDiffusionOnEKS"

DIMENSION_DEPLOYMENT_UNIT: Final = "DeploymentUnit"
DIMENSION_ACCELERATOR: Final = "Accelerator"
DIMENSIONS: Final = (DIMENSION_DEPLOYMENT_UNIT, DIMENSION_ACCELERATOR)

# The `Accelerator` dimension's values: the accelerators the stacks name (cdk/accelerators.py), and
# `cpu` for a laptop.
ACCELERATORS: Final = ("neuron", "nvidia", "cpu")
# The `Accelerator` dimension's value for each service BACKEND: the hardware, not the software
# stack, so that it matches the accelerator names the stacks use (cdk/accelerators.py).
ACCELERATOR_BY_BACKEND: Final = {"neuron": "neuron", "cuda": "nvidia", "cpu": "cpu"}


def accelerator_dimension(backend: str) -> str:
    """The `Accelerator` dimension value a service running `backend` publishes."""
    return ACCELERATOR_BY_BACKEND[backend]


@dataclass(frozen=True)
class MetricSpec:
    """One published metric: its name, CloudWatch unit and what it counts."""

    name: str
    unit: str
    description: str


REQUESTS: Final = MetricSpec("Requests", "Count", "Generation requests received")
ERRORS: Final = MetricSpec("Errors", "Count", "Generation requests that ended in a 5xx")
LATENCY: Final = MetricSpec("Latency", "Milliseconds", "End-to-end latency of a generation request")
QUEUE_DEPTH: Final = MetricSpec("QueueDepth", "Count", "Requests waiting in the batching queue")
BATCH_SIZE: Final = MetricSpec("BatchSize", "Count", "Requests per pipeline call")
IMAGES_GENERATED: Final = MetricSpec("ImagesGenerated", "Count", "Images returned to clients")

JOBS_SUCCEEDED: Final = MetricSpec("JobsSucceeded", "Count", "Asynchronous jobs this deployment unit finished")
JOBS_FAILED: Final = MetricSpec("JobsFailed", "Count", "Asynchronous jobs that failed their last attempt here")

ALL_METRICS: Final = (
    REQUESTS,
    ERRORS,
    LATENCY,
    QUEUE_DEPTH,
    BATCH_SIZE,
    IMAGES_GENERATED,
    JOBS_SUCCEEDED,
    JOBS_FAILED,
)

# Published by the LLM gateway (llm_gateway/) for the vLLM server behind it, under the same dimensions.
# Requests, Errors, Latency and QueueDepth keep their meaning (a generation request; one that ended in a
# 5xx; its end-to-end time; requests waiting for the engine), so the scaling, routing and alarms built on
# them serve both workloads; the rest are a language model's own.
PROMPT_TOKENS: Final = MetricSpec("PromptTokens", "Count", "Prompt tokens of the finished generation requests")
OUTPUT_TOKENS: Final = MetricSpec("OutputTokens", "Count", "Tokens generated for the finished requests")
TIME_TO_FIRST_TOKEN: Final = MetricSpec(
    "TimeToFirstToken", "Milliseconds", "Time from a streamed request's arrival to its first event"
)
TIME_PER_OUTPUT_TOKEN: Final = MetricSpec(
    "TimePerOutputToken", "Milliseconds", "A streamed request's time after its first event, per further token"
)
REQUESTS_RUNNING: Final = MetricSpec("RequestsRunning", "Count", "Requests the engine is generating for")
KV_CACHE_USAGE: Final = MetricSpec("KvCacheUsage", "Percent", "The engine's KV cache in use")
# vLLM's prefix cache, in prompt tokens since the last flush: looked up, and found (its hit rate is their ratio).
PREFIX_CACHE_QUERIES: Final = MetricSpec(
    "PrefixCacheQueries", "Count", "Prompt tokens the engine looked up in its prefix cache"
)
PREFIX_CACHE_HITS: Final = MetricSpec("PrefixCacheHits", "Count", "Prompt tokens the engine found in its prefix cache")

LLM_METRICS: Final = (
    REQUESTS,
    ERRORS,
    LATENCY,
    QUEUE_DEPTH,
    PROMPT_TOKENS,
    OUTPUT_TOKENS,
    TIME_TO_FIRST_TOKEN,
    TIME_PER_OUTPUT_TOKEN,
    REQUESTS_RUNNING,
    KV_CACHE_USAGE,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
)
# Counters: what a flush publishes is their total (the rest keep every sample, for percentiles).
_COUNTED: Final = (
    REQUESTS,
    ERRORS,
    IMAGES_GENERATED,
    JOBS_SUCCEEDED,
    JOBS_FAILED,
    PROMPT_TOKENS,
    OUTPUT_TOKENS,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
)
COUNTERS: Final = frozenset(spec.name for spec in _COUNTED)

# The job queue's own metrics, which SQS publishes (AWS/SQS, dimension QueueName; names from the
# SQS developer guide's "Available CloudWatch metrics for Amazon SQS"): the stacks read these for
# the dashboard and alarms; the service does not publish them.
SQS_NAMESPACE: Final = "AWS/SQS"
SQS_DIMENSION_QUEUE: Final = "QueueName"
SQS_VISIBLE: Final = "ApproximateNumberOfMessagesVisible"
SQS_NOT_VISIBLE: Final = "ApproximateNumberOfMessagesNotVisible"
SQS_OLDEST_AGE: Final = "ApproximateAgeOfOldestMessage"
SQS_RECEIVED: Final = "NumberOfMessagesReceived"

# Published by the routing controller (routing_controller/), not by the service: the forward weight
# it set for each accelerator's target group, out of a total of 100, with the same dimensions.
ROUTING_WEIGHT: Final = MetricSpec("RoutingWeight", "None", "ALB forward weight the routing controller set")
CONTROLLER_METRICS: Final = (ROUTING_WEIGHT,)
