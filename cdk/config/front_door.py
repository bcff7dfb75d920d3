"""Deploy-time settings of the front door: how the service is reached, who may call it, WAF limits.

Two routes reach the UI over HTTPS (docs/serving.md, "Front door"):

- `cloudfront` (default, needs no domain): CloudFront with its default certificate in front of an
  internal ALB through a CloudFront VPC origin. The ALB is never on the internet.
- `alb-https`: the ALB itself serves HTTPS with the ACM certificate of a domain the user gives,
  and redirects HTTP to HTTPS.

On both, the service verifies who is calling (Cognito sign-in in the browser, bearer tokens for
programs; app/auth/) and a regional AWS WAF web ACL sits on the ALB. A combination that would put
plain HTTP or an unauthenticated endpoint on the internet is a ConfigError naming the settings.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, Literal

from cdk.config.context import ConfigError, Context

FrontDoorRoute = Literal["cloudfront", "alb-https"]
FRONT_DOOR_ROUTES: Final = ("cloudfront", "alb-https")
AuthMode = Literal["cognito", "off"]
AUTH_MODES: Final = ("cognito", "off")
# AWS WAF rate-based rules: the lowest limit is 10 and the evaluation window one of these (AWS WAF
# Developer Guide, "Rate-based rule high-level settings").
WAF_MIN_RATE_LIMIT: Final = 10
WAF_MAX_RATE_LIMIT: Final = 2_000_000_000
WAF_WINDOWS: Final = (60, 120, 300, 600)
# CloudFront's origin response ("read") timeout: 1-60 s by default ("Response timeout per origin", Amazon
# CloudFront Developer Guide, Quotas: a higher value needs a quota increase), and at most 120 s for a VPC
# origin whatever the quota (CloudFront API Reference, VpcOriginConfig.OriginReadTimeout).
CLOUDFRONT_DEFAULT_TIMEOUT_QUOTA_S: Final = 60
CLOUDFRONT_VPC_ORIGIN_MAX_READ_TIMEOUT_S: Final = 120
# CloudFront waits this much longer than the service's deadline, so a request that reaches its deadline gets
# the service's own JSON 504 (through the ALB), not CloudFront's error page.
ORIGIN_READ_MARGIN_S: Final = 5

_CERT_ARN = r"arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+"
_DOMAIN = r"(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}"
# Cognito domain prefixes: lowercase letters, digits and hyphens; "aws", "amazon" and "cognito" are
# reserved words (Amazon Cognito Developer Guide, "Using the Amazon Cognito prefix domain").
_DOMAIN_PREFIX = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_RESERVED_PREFIX_WORDS: Final = ("aws", "amazon", "cognito")
_HTTPS_URL = r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?"
# Cognito identity provider names: 1-32 characters, no spaces or underscores here (kept simple).
_PROVIDER_NAME = r"[A-Za-z0-9][A-Za-z0-9.-]{0,31}"
_SM_NAME_PATTERN = r"[A-Za-z0-9/_+=.@-]{1,512}"
# A subnet group as the CDK's VPC lookup names it: the aws-cdk:subnet-name tag, or Public/Private/Isolated.
_SUBNET_GROUP = r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}"


@dataclass(frozen=True)
class OidcProvider:
    """An existing OpenID Connect provider that people sign in with, federated by the user pool.

    Its client secret stays in Secrets Manager: the template holds only a dynamic reference to it.
    """

    issuer_url: str
    client_id: str
    client_secret_name: str  # a Secrets Manager secret holding the client secret as its string
    name: str

    @classmethod
    def from_context(cls, ctx: Context) -> OidcProvider | None:
        """authOidc*: all of issuer, client id and secret name, or none of them."""
        keys = ("authOidcIssuer", "authOidcClientId", "authOidcClientSecretName")
        given = [key for key in keys if ctx.raw(key, None) is not None]
        if not given:
            return None
        missing = [key for key in keys if key not in given]
        if missing:
            raise ConfigError(
                f"setting '{missing[0]}' is required with '{given[0]}': a federated OIDC provider needs "
                + ", ".join(keys)
            )
        return cls(
            issuer_url=ctx.string("authOidcIssuer", pattern=_HTTPS_URL, description="an https:// issuer URL"),
            client_id=ctx.string("authOidcClientId"),
            client_secret_name=ctx.string(
                "authOidcClientSecretName", pattern=_SM_NAME_PATTERN, description="a Secrets Manager secret name"
            ),
            name=ctx.string(
                "authOidcName", "SSO", pattern=_PROVIDER_NAME, description="1-32 letters, digits, dots, hyphens"
            ),
        )


@dataclass(frozen=True)
class FrontDoorConfig:
    """The ingress*/auth*/waf* settings that decide what faces the internet."""

    route: FrontDoorRoute
    internet_facing: bool  # the ALB's scheme; always False on the cloudfront route
    certificate_arn: str | None  # alb-https only
    domain_name: str | None  # alb-https only: the name the certificate covers
    auth: AuthMode
    auth_domain_prefix: str | None  # None: derived from the load balancer name and the account
    waf_rate_limit: int  # requests per client per window
    waf_rate_window_s: int
    oidc: OidcProvider | None = None  # people sign in there instead of with a user pool password
    # cloudfront only: IPv6 viewers allowed beside ingressAllowedCidrs (IPv4); the ALB itself is IPv4-only.
    allowed_ipv6_cidrs: tuple[str, ...] = ()
    # cloudfront only: the account's CloudFront origin response timeout quota, which bounds the read timeout.
    cloudfront_timeout_quota_s: int = CLOUDFRONT_DEFAULT_TIMEOUT_QUOTA_S
    # The VPC subnet group the ALB is placed in (only load balancers in it); None: the app's own VPC's group.
    subnet_group: str | None = None

    @property
    def exposed(self) -> bool:
        """Whether anyone on the internet can reach the service (through CloudFront or the ALB)."""
        return self.route == "cloudfront" or self.internet_facing

    @classmethod
    def from_context(cls, ctx: Context) -> FrontDoorConfig:
        """Read and check the front-door settings; bad combinations name every setting involved."""
        cfg = cls(
            route=ctx.string("ingressFrontDoor", allowed=FRONT_DOOR_ROUTES),
            internet_facing=ctx.boolean("ingressInternetFacing"),
            certificate_arn=ctx.string("ingressCertificateArn", None, pattern=_CERT_ARN, description="an ACM ARN"),
            domain_name=ctx.string(
                "ingressDomainName", None, pattern=_DOMAIN, description="a lower-case DNS name such as sd.example.com"
            ),
            auth=ctx.string("authMode", allowed=AUTH_MODES),
            auth_domain_prefix=ctx.string(
                "authDomainPrefix",
                None,
                pattern=_DOMAIN_PREFIX,
                description="1-63 lower-case letters, digits and hyphens",
            ),
            waf_rate_limit=ctx.integer("wafRateLimit", minimum=WAF_MIN_RATE_LIMIT, maximum=WAF_MAX_RATE_LIMIT),
            waf_rate_window_s=ctx.integer("wafRateWindowSeconds", minimum=min(WAF_WINDOWS), maximum=max(WAF_WINDOWS)),
            oidc=OidcProvider.from_context(ctx),
            allowed_ipv6_cidrs=_ipv6_cidrs(ctx, "ingressAllowedIpv6Cidrs"),
            cloudfront_timeout_quota_s=ctx.integer(
                "ingressCloudFrontTimeoutQuotaSeconds", minimum=1, maximum=CLOUDFRONT_VPC_ORIGIN_MAX_READ_TIMEOUT_S
            ),
            subnet_group=ctx.string(
                "ingressSubnetGroup",
                None,
                pattern=_SUBNET_GROUP,
                description="a subnet group name such as LoadBalancers",
            ),
        )
        cfg._check()
        return cfg

    def _check(self) -> None:
        if self.route == "cloudfront":
            if self.internet_facing:
                raise ConfigError(
                    "settings 'ingressFrontDoor' = 'cloudfront' and 'ingressInternetFacing' = true would put the "
                    "ALB's plain-HTTP listener on the internet beside CloudFront: set ingressInternetFacing to "
                    "false (CloudFront reaches the internal ALB through a VPC origin)"
                )
            for key, value in self._https_settings():
                if value is not None:
                    raise ConfigError(
                        f"setting '{key}' is only used with 'ingressFrontDoor' = 'alb-https' (CloudFront serves "
                        "its own default certificate): remove it or set ingressFrontDoor to alb-https"
                    )
        else:
            if self.allowed_ipv6_cidrs:
                raise ConfigError(
                    "setting 'ingressAllowedIpv6Cidrs' is only used with 'ingressFrontDoor' = 'cloudfront': the ALB "
                    "of alb-https listens on IPv4 only, so list its viewers in ingressAllowedCidrs"
                )
            for key, value in self._https_settings():
                if value is None:
                    raise ConfigError(
                        f"setting '{key}' is required with 'ingressFrontDoor' = 'alb-https': the ALB serves "
                        "HTTPS for that domain with that ACM certificate"
                    )
        if self.auth == "off" and self.exposed:
            where = (
                "'ingressFrontDoor' = 'cloudfront'" if self.route == "cloudfront" else "'ingressInternetFacing' = true"
            )
            raise ConfigError(
                f"setting 'authMode' = 'off' with {where} would let anyone on the internet use the service "
                "without signing in: keep authMode = cognito, or use an internal ALB (ingressFrontDoor = "
                "alb-https with ingressInternetFacing = false)"
            )
        if self.oidc is not None and self.auth != "cognito":
            raise ConfigError("setting 'authOidcIssuer' needs 'authMode' = 'cognito': the user pool federates it")
        if self.waf_rate_window_s not in WAF_WINDOWS:
            raise ConfigError(
                f"setting 'wafRateWindowSeconds' = {self.waf_rate_window_s} is invalid: expected one of "
                + ", ".join(str(w) for w in WAF_WINDOWS)
            )
        prefix = self.auth_domain_prefix
        if prefix is not None and any(word in prefix for word in _RESERVED_PREFIX_WORDS):
            raise ConfigError(
                f"setting 'authDomainPrefix' = {prefix!r} is invalid: Cognito reserves the words "
                + ", ".join(_RESERVED_PREFIX_WORDS)
            )

    def domain_prefix(self, load_balancer_name: str, account: str) -> str:
        """authDomainPrefix, or `<ingressLoadBalancerName>-<account>` (unique per region) when unset."""
        return self.auth_domain_prefix or f"{load_balancer_name.lower()}-{account}"

    def check_default_prefix(self, load_balancer_name: str) -> None:
        """The derived prefix must avoid Cognito's reserved words too."""
        name = load_balancer_name.lower()
        derived = self.auth == "cognito" and self.auth_domain_prefix is None
        if derived and any(word in name for word in _RESERVED_PREFIX_WORDS):
            raise ConfigError(
                f"setting 'ingressLoadBalancerName' = {load_balancer_name!r} names the Cognito domain when "
                "'authDomainPrefix' is unset, and Cognito reserves the words "
                + ", ".join(_RESERVED_PREFIX_WORDS)
                + ": set authDomainPrefix"
            )

    def _https_settings(self) -> tuple[tuple[str, str | None], ...]:
        """The alb-https route's own settings, by key."""
        return (("ingressCertificateArn", self.certificate_arn), ("ingressDomainName", self.domain_name))

    def origin_read_timeout_s(self, request_timeout_s: int) -> int:
        """CloudFront's origin read timeout: strictly longer than the service's deadline."""
        return request_timeout_s + ORIGIN_READ_MARGIN_S

    def check_timeouts(self, request_timeout_s: int) -> None:
        """CloudFront must wait longer than the service's deadline, within the account's quota."""
        if self.route != "cloudfront":
            return
        read_timeout = self.origin_read_timeout_s(request_timeout_s)
        if read_timeout > self.cloudfront_timeout_quota_s:
            raise ConfigError(
                f"setting 'servingRequestTimeoutSeconds' = {request_timeout_s} needs a CloudFront origin read "
                f"timeout of {read_timeout} s (the deadline + {ORIGIN_READ_MARGIN_S} s, so the service's own 504 "
                f"arrives first), above 'ingressCloudFrontTimeoutQuotaSeconds' = {self.cloudfront_timeout_quota_s} "
                "with 'ingressFrontDoor' = 'cloudfront': lower servingRequestTimeoutSeconds to at most "
                f"{self.cloudfront_timeout_quota_s - ORIGIN_READ_MARGIN_S}, or raise the account's CloudFront "
                "'Response timeout per origin' quota (at most "
                f"{CLOUDFRONT_VPC_ORIGIN_MAX_READ_TIMEOUT_S} s for a VPC origin) and set "
                "ingressCloudFrontTimeoutQuotaSeconds to it, or use ingressFrontDoor = alb-https"
            )


def _ipv6_cidrs(ctx: Context, key: str) -> tuple[str, ...]:
    """A list of IPv6 CIDR blocks such as 2001:db8::/32 (may be empty)."""
    items = ctx.string_list(key, allow_empty=True)
    for item in items:
        try:
            network = ipaddress.ip_network(item, strict=True)
        except ValueError:
            network = None
        if network is None or network.version != 6:
            raise ConfigError(f"setting '{key}' = {item!r} is invalid: expected IPv6 CIDR blocks such as 2001:db8::/32")
    return tuple(items)
