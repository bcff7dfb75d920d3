"""NetworkStack: the VPC (new or looked up)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.network import Network


class NetworkStack(Stack):
    """Owns the VPC so that the cluster can be replaced without touching the network."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Stable Diffusion on EKS: network", **kwargs)
        self.vpc: ec2.IVpc = Network(self, "Network", config=config).vpc
