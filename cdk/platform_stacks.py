"""The platform's stacks as the app assembly hands them on: to the stacks that deploy onto them, and to the checks."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk

from cdk.platform_handle import PlatformHandle
from cdk.stacks.cluster_additions_stack import ClusterAdditionsStack
from cdk.stacks.cluster_stack import ClusterStack
from cdk.stacks.images_stack import ImagesStack
from cdk.stacks.network_stack import NetworkStack


@dataclass(frozen=True)
class PlatformStacks:
    """The platform's stacks and what they hand on to the stacks that deploy onto them."""

    env: cdk.Environment
    network: NetworkStack | None  # None when an existing VPC is looked up (inside the cluster stack)
    cluster: ClusterStack | ClusterAdditionsStack  # the additions to a team's cluster (existingClusterName)
    images: ImagesStack
    handle: PlatformHandle

    def add_workload(self, stack: cdk.Stack) -> None:
        """Make a stack that runs the service images deploy after the images are built.

        The image URIs carry no cross-stack reference (see image_builds.image_uri), so this
        ordering is explicit.
        """
        stack.add_stack_dependency(self.images)
        stack.add_stack_dependency(self.cluster)
