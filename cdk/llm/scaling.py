"""KEDA for the LLM Deployments: each scales on vLLM's queue and KV-cache use, as its gateway publishes them.

Both are per-pod figures averaged over the pods of one deployment unit (each gateway samples its own vLLM),
so the triggers take KEDA's "Value" metric type: the HPA wants current replicas x average / target pods.
QueueDepth is requests waiting in vLLM (`llmScalingQueueTarget<Acc>` per pod); KvCacheUsage is the percentage
of the KV cache in use (`llmScalingKvCacheTargetPercent`): a pod whose cache is nearly full starts preempting
sequences before its queue grows. Whichever trigger asks for more pods wins.
"""

from __future__ import annotations

from typing import Any

from cdk.accelerators import Accelerator
from cdk.config.llm import LlmConfig
from cdk.config.serving import ServingConfig
from cdk.llm.names import deployment_name
from cdk.serving.scaling import metric_trigger, scaled_deployment
from common import metric_names as m


def dimensions(acc: Accelerator) -> dict[str, str]:
    """The dimensions the LLM gateway on `acc` publishes with (its DEPLOYMENT_UNIT and ACCELERATOR)."""
    return {m.DIMENSION_DEPLOYMENT_UNIT: deployment_name(acc), m.DIMENSION_ACCELERATOR: acc.name}


def scaled_object(acc: Accelerator, llm: LlmConfig, cfg: ServingConfig, region: str) -> dict[str, Any]:
    """The LLM Deployment's ScaledObject between llmMinReplicas<Acc> and llmMaxReplicas<Acc>."""
    per = llm.per_accelerator[acc.name]
    dims = dimensions(acc)
    triggers = [
        metric_trigger(
            dims, m.QUEUE_DEPTH.name, stat="Average", target=per.queue_target, region=region, metric_type="Value"
        ),
        metric_trigger(
            dims,
            m.KV_CACHE_USAGE.name,
            stat="Average",
            target=llm.kv_cache_target_percent,
            region=region,
            metric_type="Value",
        ),
    ]
    return scaled_deployment(deployment_name(acc), cfg, per.min_replicas, per.max_replicas, triggers)
