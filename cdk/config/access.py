"""Who reaches the cluster's API after a deploy: the deploying principal's access entry and the kubectl tunnel.

`deployerArn` is the IAM role or user that runs the deploy (`make deploy` resolves it with tools/deployer.py
and passes it with -c): it gets a cluster-admin access entry, so kubectl works for whoever deployed without
naming themselves in `adminRoleArns`. `kubectlTunnel` keeps a tiny instance in a private subnet that SSM
port-forwards to the private API endpoint (`make kubectl-tunnel`); false removes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdk.config.context import Context

# An IAM role (with or without a path) or an IAM user; EKS access entries take no assumed-role session ARNs.
_PRINCIPAL_ARN = r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+"


@dataclass(frozen=True)
class AccessConfig:
    """The deploying principal (None: not given, no access entry for it) and whether the tunnel instance exists."""

    deployer_arn: str | None
    kubectl_tunnel: bool

    @classmethod
    def from_context(cls, values: Mapping[str, Any]) -> AccessConfig:
        """Read `deployerArn` (optional; empty means none) and `kubectlTunnel`."""
        ctx = Context(values)
        deployer = ctx.raw("deployerArn", "") or None
        if deployer is not None:
            deployer = ctx.string(
                "deployerArn",
                pattern=_PRINCIPAL_ARN,
                description="an IAM role or user ARN such as arn:aws:iam::123456789012:role/Admin "
                "(`make deploy` resolves yours)",
            )
        return cls(deployer_arn=deployer, kubectl_tunnel=ctx.boolean("kubectlTunnel"))
