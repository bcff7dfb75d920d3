"""The gateway's settings: one typed object read from environment variables (name = field in upper case).

The sign-in variables are the image service's (app/auth/env.py), so one ConfigMap serves both.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.metrics.publishers import MetricsMode

AuthMode = Literal["off", "cognito"]
Accelerator = Literal["neuron", "nvidia", "cpu"]  # app.metric_names.ACCELERATORS
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class SettingsError(ValueError):
    """A setting has a value the gateway cannot start with."""


class GatewaySettings(BaseSettings):
    """All run-time settings of the gateway."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", frozen=True)

    host: str = Field("0.0.0.0", description="bind address; make run-llm uses 127.0.0.1")
    port: int = Field(8000, ge=1, le=65535)
    keep_alive_s: float = Field(
        5.0,
        gt=0.0,
        le=4000.0,
        description="how long an idle keep-alive connection stays open; behind a load balancer, longer than its "
        "idle timeout, or it may reuse a connection the gateway just closed (a 502)",
    )
    upstream_url: str = Field("http://127.0.0.1:8001", description="vLLM's OpenAI server on the pod")
    upstream_connect_timeout_s: float = Field(5.0, gt=0.0, le=120.0)
    max_concurrent_requests: int = Field(
        64, ge=1, le=10000, description="generations in flight (streams included); more get a 429"
    )
    retry_after_s: int = Field(1, ge=1, le=3600, description="the Retry-After of a 429 and of a 503 while draining")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="larger request bodies get a 413")
    max_discard_bytes: int = Field(
        8 * 1024 * 1024,
        ge=0,
        description="how much of a refused body is read and dropped before the 413, so the client can read it",
    )
    shutdown_grace_s: float = Field(30.0, ge=0.0, description="time open streams get after SIGTERM")
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
    log_level: LogLevel = "INFO"
    chat_page: bool = Field(
        False,
        description="serve the chat page at / (make run-llm turns it on; on the cluster the front door's / is the "
        "image UI, so the pods serve only the API)",
    )
    metrics: MetricsMode = Field("off", description="emf: JSON lines on stdout; cloudwatch: PutMetricData")
    metrics_flush_s: float = Field(10.0, gt=0.0, le=300.0, description="how often the metrics are published")
    deployment_unit: str = Field("local", min_length=1, max_length=255, description="the metrics' DeploymentUnit")
    accelerator: Accelerator = Field("cpu", description="the metrics' Accelerator: what the engine behind runs on")
    auth: AuthMode = Field("off", description="cognito: every route but the probes needs a Cognito access token")
    auth_issuer: str = Field("", description="https://cognito-idp.<region>.amazonaws.com/<user pool id>")
    auth_client_ids: str = Field("", description="comma-separated app client ids whose access tokens are accepted")

    @property
    def auth_client_id_list(self) -> tuple[str, ...]:
        """AUTH_CLIENT_IDS as a tuple."""
        return tuple(part.strip() for part in self.auth_client_ids.split(",") if part.strip())

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.upstream_url.startswith(("http://", "https://")):
            raise ValueError("UPSTREAM_URL must be an http(s) URL")
        if self.auth == "cognito":
            if not self.auth_issuer.startswith("https://") and not self.auth_issuer.startswith(
                ("http://127.0.0.1:", "http://localhost:")
            ):
                raise ValueError("AUTH_ISSUER must be an https:// URL when AUTH=cognito")
            if not self.auth_client_id_list:
                raise ValueError("AUTH_CLIENT_IDS is required when AUTH=cognito")
        return self


def load_settings(**overrides: object) -> GatewaySettings:
    """Read the settings from the environment (overrides win) or raise one readable SettingsError."""
    try:
        return GatewaySettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]).upper() or "settings"
            problems.append(f"{where}: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
