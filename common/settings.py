"""The settings every HTTP service shares, and the one loader that reads them.

The image service's `Settings` (app/settings.py) and the LLM gateway's `GatewaySettings`
(llm_gateway/settings.py) extend `ServiceSettings`: the network, the HTTP bounds (common/http/protocol.py),
the drain, logs, metrics and the token sign-in are read the same way, from the same variable names, so
one ConfigMap (cdk/serving/sign_in.py) and one set of manifests' variables serve both.
"""

from __future__ import annotations

from typing import Literal, Self, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.http.body import BodyLimits
from common.metrics.publishers import MetricsMode

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
AuthMode = Literal["off", "cognito"]

SettingsT = TypeVar("SettingsT", bound="ServiceSettings")


class SettingsError(ValueError):
    """A setting has a value the service cannot start with."""


class ServiceSettings(BaseSettings):
    """What every service reads from its environment (variable = field name in upper case)."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", frozen=True)

    # Network.
    host: str = Field("0.0.0.0", description="bind address; make run and make run-llm use 127.0.0.1")
    port: int = Field(8000, ge=1, le=65535)
    keep_alive_s: float = Field(
        5.0,
        gt=0.0,
        le=4000.0,
        description="how long an idle keep-alive connection stays open; behind a load balancer, longer than its "
        "idle timeout, or it may reuse a connection the service just closed (a 502)",
    )

    # Bounds on a request and on connections.
    max_header_bytes: int = Field(
        16 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="request line + headers, and a chunked body's trailer section apart; larger: a 431, closed",
    )
    header_timeout_s: float = Field(
        10.0, gt=0.0, le=300.0, description="a connection that does not finish its headers in time is closed"
    )
    body_timeout_s: float = Field(
        10.0,
        gt=0.0,
        le=300.0,
        description="a request whose body has not arrived this long after its headers gets a 408 and is closed",
    )
    max_header_count: int = Field(
        100,
        ge=8,
        le=10000,
        description="request header fields, and trailer fields apart; more get a 431 and the connection is closed",
    )
    write_timeout_s: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="how long a response may wait for its client to read (the socket's buffers full); past it the "
        "connection is closed and its work stopped, so a client that never reads holds no slot",
    )
    max_connections: int = Field(
        512,
        ge=8,
        le=100000,
        description="open connections; past it the oldest one idle or still sending its request is closed, "
        "and only the probes are served on a connection beyond it",
    )
    max_body_bytes: int = Field(64 * 1024, ge=1024, description="larger request bodies get a 413 (every route)")
    max_discard_bytes: int = Field(
        8 * 1024 * 1024,
        ge=0,
        description="how much of a refused body is read and dropped before the 413, so the client can read it",
    )

    # Stopping.
    shutdown_grace_s: float = Field(
        30.0, ge=0.0, description="time in-flight work (open streams included) gets after SIGTERM"
    )

    # Logs and metrics.
    log_level: LogLevel = Field("INFO", description="JSON logs on stderr at this level")
    metrics: MetricsMode = Field("off", description="emf: JSON lines on stdout; cloudwatch: PutMetricData")
    metrics_flush_s: float = Field(10.0, gt=0.0, le=300.0, description="how often the metrics are published")
    deployment_unit: str = Field("local", min_length=1, max_length=255, description="the metrics' DeploymentUnit")

    # Sign-in for programs (variable names in common/auth/env.py): off for `make run` on 127.0.0.1; the
    # cluster's pods get AUTH=cognito and the rest from their ConfigMap (cdk/serving/sign_in.py).
    auth: AuthMode = Field("off", description="cognito: every route but the probes needs a Cognito access token")
    auth_issuer: str = Field("", description="https://cognito-idp.<region>.amazonaws.com/<user pool id>")
    auth_client_ids: str = Field("", description="comma-separated app client ids whose access tokens are accepted")

    @property
    def auth_client_id_list(self) -> tuple[str, ...]:
        """AUTH_CLIENT_IDS as a tuple."""
        return tuple(part.strip() for part in self.auth_client_ids.split(",") if part.strip())

    @property
    def body_limits(self) -> BodyLimits:
        """The bounded body reader's limits. The discard gets half the body time, so that a refused body's
        413 leaves before the protocol's body clock runs out."""
        return BodyLimits(
            max_bytes=self.max_body_bytes,
            max_discard_bytes=self.max_discard_bytes,
            discard_timeout_s=self.body_timeout_s / 2,
        )

    @model_validator(mode="after")
    def _check_token_sign_in(self) -> Self:
        if self.auth == "off":
            return self
        if not self.auth_issuer:
            raise ValueError(f"AUTH_ISSUER is required when AUTH={self.auth}")
        if not https_or_loopback(self.auth_issuer):
            raise ValueError("AUTH_ISSUER must be an https:// URL (plain http only on 127.0.0.1)")
        if not self.auth_client_id_list:
            raise ValueError(f"AUTH_CLIENT_IDS is required when AUTH={self.auth}")
        return self


class BrowserSignInSettings(ServiceSettings):
    """A service that signs people in with a browser (common/auth/browser.py) as well as checking tokens: the
    image service and the starting gate in front of it. Variable names in common/auth/env.py."""

    auth_ui_client_id: str = Field("", description="the browser sign-in's app client (public, PKCE)")
    auth_login_url: str = Field(
        "", description="the user pool domain, https://<prefix>.auth.<region>.amazoncognito.com"
    )
    public_url: str = Field(
        "", description="where browsers reach the service, https://<host>: the sign-in's callback and the UI's root"
    )

    @model_validator(mode="after")
    def _check_browser_sign_in(self) -> Self:
        if self.auth == "off":
            return self
        for name in ("auth_ui_client_id", "auth_login_url", "public_url"):
            if not getattr(self, name):
                raise ValueError(f"{name.upper()} is required when AUTH={self.auth}")
        for name in ("auth_login_url", "public_url"):
            if not https_or_loopback(getattr(self, name)):  # the ALB may say http behind CloudFront
                raise ValueError(f"{name.upper()} must be an https:// URL (plain http only on 127.0.0.1)")
        if self.auth_ui_client_id not in self.auth_client_id_list:
            raise ValueError("AUTH_UI_CLIENT_ID must be one of AUTH_CLIENT_IDS")
        return self


def https_or_loopback(url: str) -> bool:
    """True for an https:// URL, or a plain http:// one on the loopback interface (local sign-in tests)."""
    return url.startswith("https://") or url.startswith(("http://127.0.0.1:", "http://localhost:"))


def read_settings(settings_class: type[SettingsT], **overrides: object) -> SettingsT:
    """Read `settings_class` from the environment (overrides win) or raise one readable SettingsError that
    names each bad variable."""
    try:
        return settings_class(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]).upper() or "settings"
            problems.append(f"{where}: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
