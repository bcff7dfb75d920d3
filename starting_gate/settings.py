"""The gate's settings: one typed object read from its environment.

The gate is served like the services (common/http/): the same HTTP bounds, keep-alive, drain and sign-in
variables (`BrowserSignInSettings`, from the pods' sign-in ConfigMap), plus where it forwards to and what it says
while nothing answers there.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, field_validator

from common.settings import BrowserSignInSettings, read_settings


class GateSettings(BrowserSignInSettings):
    """Where requests go once a pod is ready, what to say until then, and whose demand to count."""

    upstream_url: str = Field(description="the serving pool's Service URL, e.g. http://sd-gpu.sd.svc:8000")
    starting_minutes: int = Field(
        10, ge=1, le=120, description='"starting, about N minutes": the time to the first image from cold'
    )
    retry_after_seconds: int = Field(
        30, ge=1, le=3600, description="Retry-After of the starting answer: how soon a client should try again"
    )
    demand_units: tuple[Mapping[str, str], ...] = Field(
        (), description="the metric dimensions of each pool the gate wakes (a JSON list of {dimension: value})"
    )
    upstream_connect_timeout_s: float = Field(
        2.0,
        gt=0.0,
        le=60.0,
        description="a Service without ready endpoints refuses or times out the connection: the pool is cold",
    )
    upstream_timeout_s: float = Field(
        300.0,
        gt=0.0,
        le=3600.0,
        description="how long the pool may stay silent (before its answer, or between two pieces of a stream); "
        "the pool's own request deadline is shorter",
    )
    upstream_pool_timeout_s: float = Field(
        1.0,
        gt=0.0,
        le=60.0,
        description="how long a request waits for an upstream connection once MAX_CONNECTIONS are in use (then a 503)",
    )

    @field_validator("upstream_url")
    @classmethod
    def _plain_http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


def load_settings(**overrides: object) -> GateSettings:
    """The gate's settings from the environment (overrides win); SettingsError names each bad variable."""
    return read_settings(GateSettings, **overrides)
