"""The one AWS account and region a synth targets: explicit, or the labelled example for offline synths.

Everything region-dependent (the ELB log-delivery principal, the Deep Learning Containers
registry, the availability zones) follows from the region, so a synth without one cannot be right
anywhere. The CDK CLI passes the account and region to the app as CDK_DEFAULT_ACCOUNT /
CDK_DEFAULT_REGION on `cdk synth` and `cdk deploy` alike (aws-cdk CLI 2.1148, toolkit-lib
`api/cloud-assembly/environment.ts` `prepareDefaultEnvironment`): the region always (us-east-1 when
nothing is configured), the account only when credentials resolve one. So an app without an account
is one without credentials, which cannot deploy: `exampleEnvironment=true` lets it synthesize
offline for AWS's documentation account instead, marked on every stack as not deployable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import region_info

from cdk.config.context import ConfigError, Context

ACCOUNT_PATTERN: Final = r"\d{12}"
REGION_PATTERN: Final = r"[a-z]{2}(-[a-z]+)+-\d"
# AWS's documentation account id and a region where the pinned instance families and DLCs exist.
EXAMPLE_ACCOUNT: Final = "123456789012"
EXAMPLE_REGION: Final = "us-east-1"
MISSING_ACCOUNT: Final = (
    "no AWS account to deploy to: run the CDK CLI with credentials (it sets CDK_DEFAULT_ACCOUNT) or pass "
    "-c account=<12-digit id>, with a region (CDK_DEFAULT_REGION or -c region=us-east-1); to synthesize "
    "offline without an account pass -c exampleEnvironment=true (the templates are then not deployable)"
)


@dataclass(frozen=True)
class DeployEnvironment:
    """Account and region every stack is synthesized for; `example` marks the offline stand-in."""

    account: str
    region: str
    example: bool = False


def resolve_environment(values: Mapping[str, Any], environ: Mapping[str, str]) -> DeployEnvironment:
    """The synth's environment: `-c account=`/`-c region=` first, then CDK_DEFAULT_ACCOUNT/REGION.

    Without an account, `exampleEnvironment=true` gives the example environment (in its own
    region, whatever CDK_DEFAULT_REGION says: the CLI always sets that one); otherwise a
    ConfigError names the settings.
    """
    ctx = Context(values)
    account = ctx.string("account", None, pattern=ACCOUNT_PATTERN, description="a 12-digit AWS account id")
    region = ctx.string("region", None, pattern=REGION_PATTERN, description="an AWS region such as us-east-1")
    if account is None:
        account = _from_environ(environ, "CDK_DEFAULT_ACCOUNT", ACCOUNT_PATTERN, "a 12-digit AWS account id")
    if account is None:
        if not ctx.boolean("exampleEnvironment", False):
            raise ConfigError(MISSING_ACCOUNT)
        if region is not None and region != EXAMPLE_REGION:
            raise ConfigError(
                f"setting 'region' = {region!r} needs an account: the example environment is "
                f"{EXAMPLE_ACCOUNT} in {EXAMPLE_REGION}; pass -c account=... (or CDK_DEFAULT_ACCOUNT) with the region"
            )
        return DeployEnvironment(account=EXAMPLE_ACCOUNT, region=EXAMPLE_REGION, example=True)
    if region is None:
        region = _from_environ(environ, "CDK_DEFAULT_REGION", REGION_PATTERN, "an AWS region such as us-east-1")
    if region is None:
        raise ConfigError(
            f"no AWS region for account {account}: set CDK_DEFAULT_REGION (the CDK CLI sets it from "
            "AWS_REGION or your profile) or pass -c region=us-east-1"
        )
    return DeployEnvironment(account=account, region=region)


def _from_environ(environ: Mapping[str, str], name: str, pattern: str, description: str) -> str | None:
    """An environment variable's value, checked like the setting it stands for."""
    value = environ.get(name) or None
    if value is None:
        return None
    try:
        return Context({name: value}).string(name, pattern=pattern, description=description)
    except ConfigError:
        raise ConfigError(f"environment variable {name} = {value!r} is invalid: expected {description}") from None


def resolve_base_image(uri: str, region: str, *, default_dlc_account: str) -> str:
    """A base image URI for `region`: `{region}` filled in, and an image from the Deep Learning
    Containers registry moved to that region's DLC account and domain.

    The DLC registry is account 763104351884 in most regions but another account in some (and
    `.amazonaws.com.cn` in China); aws-cdk-lib's region facts (`RegionInfo.dlcRepositoryAccount`,
    `domainSuffix`, aws-cdk v2.275.0 region-info) know which. Raises ValueError for a region CDK
    names no DLC account for: the caller names the setting that takes a full URI instead.
    """
    resolved = uri.replace("{region}", region)
    registry, _, rest = resolved.partition("/")
    if registry != f"{default_dlc_account}.dkr.ecr.{region}.amazonaws.com":
        return resolved
    facts = region_info.RegionInfo.get(region)
    account = facts.dlc_repository_account
    if not account:
        raise ValueError(f"aws-cdk-lib names no Deep Learning Containers registry for region {region}")
    return f"{account}.dkr.ecr.{region}.{facts.domain_suffix or 'amazonaws.com'}/{rest}"
