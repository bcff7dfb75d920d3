"""The gateway's settings: one typed object read from environment variables (name = field in upper case).

What every service shares (network, HTTP bounds, drain, logs, metrics, the token sign-in with the image
service's variable names, so one ConfigMap serves both) is common/settings.py's `ServiceSettings`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from common.settings import ServiceSettings, read_settings
from llm_gateway.engine_address import UNIX_SCHEME, socket_path_problem

ENGINE_PROBE_CONNECTIONS = 4
"""Connections to vLLM beyond generations and lookups: the readiness check (one at a time, shared by the probes
that come meanwhile) and the metrics sampling, with room to spare."""

Accelerator = Literal["neuron", "nvidia", "cpu"]  # common.metric_names.ACCELERATORS


class GatewaySettings(ServiceSettings):
    """All run-time settings of the gateway."""

    upstream_url: str = Field(
        "http://127.0.0.1:8001",
        description="vLLM's OpenAI server on the pod: http://host:port, or unix:/path for the Unix socket vLLM "
        "listens on with --uds (what the pods use: less gateway CPU per token than loopback TCP)",
    )
    upstream_connect_timeout_s: float = Field(5.0, gt=0.0, le=120.0)
    upstream_keep_alive_s: float = Field(
        5.0,
        ge=2.0,
        le=3600.0,
        description="how long vLLM keeps an idle connection open (its VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s unless set): "
        "the gateway lets its idle connections to vLLM go a second sooner, so it never sends on one vLLM is closing",
    )
    max_concurrent_requests: int = Field(
        64, ge=1, le=10000, description="generations in flight (streams included); more get a 429"
    )
    retry_after_s: int = Field(1, ge=1, le=3600, description="the Retry-After of a 429 and of a 503 while draining")
    # Larger than the image service's: a chat request carries the whole conversation so far.
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="larger request bodies get a 413")
    request_timeout_s: float = Field(
        0.0,
        ge=0.0,
        description="a whole (non-streamed) answer that takes longer gets a 504 and its generation is stopped; "
        "0: no deadline. On the cluster it fits the front door's origin timeout; long answers stream",
    )
    heartbeat_s: float = Field(
        15.0,
        gt=0.0,
        le=3600.0,
        description="a stream whose first event has not come for this long gets an SSE comment (and again after each "
        "such wait), so proxies in front (CloudFront, the ALB) do not cut it while it waits in the engine's queue",
    )
    delivery_wait_s: float = Field(
        60.0,
        gt=0.0,
        le=3600.0,
        description="how long, in all, a stream may wait for its client to read (WRITE_TIMEOUT_S bounds one wait): "
        "past it the stream ends with an error event and its slots are free, so a client that reads slowly but "
        "steadily cannot hold the engine's sequences after the engine is done",
    )
    max_engine_event_bytes: int = Field(
        4 * 1024 * 1024,
        ge=64 * 1024,
        le=256 * 1024 * 1024,
        description="a streamed event from the engine larger than this ends the stream with an error event (502): an "
        "event that never ends is not held whole",
    )
    max_engine_body_bytes: int = Field(
        16 * 1024 * 1024,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="a whole (non-streamed) answer from the engine larger than this is a 502, read no further",
    )
    max_concurrent_lookups: int = Field(
        8,
        ge=1,
        le=1000,
        description="lookups (forwarded GETs: /v1/models, /v1/models/{id}; with RENDER_ROUTES, the render POSTs) "
        "waiting on the engine at once; more get a 429 with Retry-After, so a flood of them holds neither the "
        "engine's connections nor the gateway's open files",
    )
    lookup_timeout_s: float = Field(
        10.0,
        gt=0.0,
        le=300.0,
        description="a lookup the engine has not answered in this long gets a 503 with Retry-After",
    )
    chat_page: bool = Field(
        False,
        description="serve the chat page at / (make run-llm turns it on; on the cluster the front door's / is the "
        "image UI, so the pods serve only the API)",
    )
    image_models: dict[str, str] = Field(
        default_factory=dict,
        description="the image models the deploy serves beside this engine, as JSON {id: family}: /v1/models lists "
        "them after the engine's, so the front door's one list holds both workloads' models (model_list.py)",
    )
    accelerator: Accelerator = Field("cpu", description="the metrics' Accelerator: what the engine behind runs on")
    structured_outputs: bool = Field(
        True,
        description="whether the engine behind applies vLLM's structured outputs (response_format json_object and "
        "json_schema, tool_choice required or named); where it does not (the Neuron plugin: "
        "llm_gateway/structured_outputs.py) such requests get a 400 that says so",
    )

    render_routes: bool = Field(
        False,
        description="forward vLLM's render routes (/v1/chat/completions/render, /v1/completions/render: the prompt as "
        "token ids, nothing generated), which vllm-router's cache_aware policy posts to every worker; on only where "
        "the engine serves them (vLLM 0.27.1, the NVIDIA image) and the router is in front (llm_gateway/routes.py)",
    )

    @property
    def engine_connections(self) -> int:
        """The most connections to vLLM open at once, the engine client's pool size (llm_gateway/engine_client.py):
        one per generation admitted and per lookup in flight, and ENGINE_PROBE_CONNECTIONS for the readiness checks
        and the metrics sampling."""
        return self.max_concurrent_requests + self.max_concurrent_lookups + ENGINE_PROBE_CONNECTIONS

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.upstream_url.startswith(("http://", "https://", UNIX_SCHEME)):
            raise ValueError("UPSTREAM_URL must be an http(s) URL or unix:/path/to/socket")
        problem = socket_path_problem(self.upstream_url)
        if problem is not None:
            raise ValueError(f"UPSTREAM_URL: {problem}")
        return self


def load_settings(**overrides: object) -> GatewaySettings:
    """Read the settings from the environment (overrides win) or raise one readable SettingsError."""
    return read_settings(GatewaySettings, **overrides)
