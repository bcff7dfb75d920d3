"""What the platform stacks hand to the serving stack.

The serving stack depends on this small surface only, not on how the platform builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

from cdk.accelerators import Accelerator


@dataclass(frozen=True)
class PlatformHandle:
    """The cluster and images the serving stack deploys onto."""

    cluster: eks.ICluster
    vpc: ec2.IVpc
    kubernetes_version: str  # "1.36": manifests are validated against this schema version
    accelerators: tuple[Accelerator, ...]  # the enabled ones, in a stable order
    image_uris: Mapping[str, str]  # accelerator name -> image URI that the builds push
    routing_controller_image: str | None = None  # built when routingMode is cost-with-failover
    # Images of ours that workloads asked for (`Workload.images`), by their kind.
    small_image_uris: Mapping[str, str] = field(default_factory=dict)
    # KEDA's operator role: the serving stack lets it read the depth of the queues it scales on.
    keda_operator_role: iam.IRole | None = None
