"""NetworkStack: the VPC (new or looked up)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Fn, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.network import Network


class NetworkStack(Stack):
    """Owns the VPC so that the cluster can be replaced without touching the network."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Stable Diffusion on EKS: network", **kwargs)
        self._max_azs = config.max_azs
        self.vpc: ec2.IVpc = Network(self, "Network", config=config).vpc

    @property
    def availability_zones(self) -> list[str]:
        """The region's first `maxAzs` zones, chosen by CloudFormation (Fn::GetAZs) at deploy time.

        A stack with an explicit account and region would otherwise look its zones up in the
        account at synth time, which needs credentials (and a cdk.context.json entry per account)
        and writes zone names into the template; this keeps every synth offline.
        """
        return [Fn.select(index, Fn.get_azs()) for index in range(self._max_azs)]
