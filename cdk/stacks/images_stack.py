"""ImagesStack: ECR repository, CodeBuild projects and the build-on-deploy custom resource."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.image_builds import ROUTING_CONTROLLER_IMAGE, ImageBuilds, SmallImage


class ImagesStack(Stack):
    """Builds the service image per enabled accelerator, and the small images of ours the settings need
    (the routing controller's, and each workload's `images`); stacks that run them depend on this one."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        workload_images: Sequence[SmallImage] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description="Stable Diffusion on EKS: service images", **kwargs)
        small: list[SmallImage] = []
        if config.serving.runs_routing_controller:
            small.append(ROUTING_CONTROLLER_IMAGE)
        small += workload_images
        self.builds = ImageBuilds(
            self, "Images", cluster_name=config.cluster_name, capacity=config.capacity, small_images=small
        )
        self.image_uris: dict[str, str] = dict(self.builds.image_uris)
        self.routing_controller_image: str | None = self.builds.small_image_uris.get(ROUTING_CONTROLLER_IMAGE.kind)
        CfnOutput(self, "Repository", value=self.builds.repository.repository_uri)
        for name in self.builds.projects:
            CfnOutput(self, f"{name.capitalize()}Image", value=self.builds.resource.get_att_string(f"{name}ImageUri"))
        for image in small:
            CfnOutput(
                self,
                f"{image.construct_prefix}Image",
                value=self.builds.resource.get_att_string(f"{image.build}ImageUri"),
            )
