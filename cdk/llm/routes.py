"""The LLM's share of the front door: the OpenAI routes, their weighted action and its routing controller."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from cdk.accelerators import Accelerator
from cdk.front_door.routing_controller import Pool, RoutedAction, pools
from cdk.llm.names import deployment_name

# The LLM routes' own weighted action, moved by a routing controller instance of its own (`llm_routing`), whose
# admission guard keeps it off the image routes' action.
LLM_ACTION_NAME: Final = "llm-weighted"
ROUTING_CONTROLLER_NAME: Final = "llm-routing-controller"
CAPACITY_SERVICE_NAME: Final = "llm"  # capacity mode: one Service over every LLM pod
# The OpenAI routes the LLM gateway serves (llm_gateway/routes.py). Exact paths: the load balancer controller
# orders Exact paths before every Prefix path ("Beginning from v2.4.3 ... pathType: Exact paths are always
# ordered first", kubernetes-sigs.github.io/aws-load-balancer-controller guide/ingress/spec), so they win
# over the image service's `/`, which keeps everything else (its /v1/generate, /v1/jobs, the UI).
LLM_PATHS: Final = ("/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings")
# The POSTs whose bodies are prompts, or texts to embed (a batch of them is easily over the WAF common rule set's
# 8 KB body rule): the WAF's common rules skip them, and the gateway's own MAX_BODY_BYTES bounds them.
LLM_PROMPT_PATHS: Final = LLM_PATHS[1:]
# OpenAI's retrieve-model path, /v1/models/{id}: a Prefix path, which the controller orders after the Exact ones and
# before the image service's shorter `/` (longest prefix first).
LLM_PREFIX_PATHS: Final = ("/v1/models/",)


def llm_pools(
    accelerators: Sequence[Accelerator],
    weights: dict[str, int],
    front: Callable[[Accelerator], str] = deployment_name,
) -> tuple[Pool, ...]:
    """The LLM Deployments (llm-neuron, llm-gpu) by weight, each behind the Service `front` names (its own, or its
    router's with `llmRouter` on), keyed like the routes' weights."""
    routed = [a for a in accelerators if front(a) in weights]
    # The controller reads ready capacity off the pool's own Deployment, whichever Service is in front of it.
    return tuple(
        replace(pool, deployment=deployment_name(acc))
        for acc, pool in zip(routed, pools(accelerators, weights, front), strict=True)
    )


def llm_routing(
    accelerators: Sequence[Accelerator],
    weights: dict[str, int],
    front: Callable[[Accelerator], str] = deployment_name,
) -> RoutedAction:
    """The OpenAI routes' instance: `llm-routing-controller` moving the `llm-weighted` action."""
    return RoutedAction(
        name=ROUTING_CONTROLLER_NAME, action=LLM_ACTION_NAME, pools=llm_pools(accelerators, weights, front)
    )
