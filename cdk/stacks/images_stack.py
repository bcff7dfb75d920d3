"""ImagesStack: ECR repository, CodeBuild projects and the build-on-deploy custom resource."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from cdk.config import AppConfig
from cdk.constructs.image_builds import ROUTING_CONTROLLER_BUILD, ImageBuilds


class ImagesStack(Stack):
    """Builds the service image per enabled accelerator; stacks that run them depend on this one."""

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Stable Diffusion on EKS: service images", **kwargs)
        self.builds = ImageBuilds(
            self,
            "Images",
            cluster_name=config.cluster_name,
            capacity=config.capacity,
            routing_controller=config.serving.runs_routing_controller,
        )
        self.image_uris: dict[str, str] = dict(self.builds.image_uris)
        self.routing_controller_image: str | None = self.builds.routing_controller_image_uri
        CfnOutput(self, "Repository", value=self.builds.repository.repository_uri)
        for name in self.builds.projects:
            CfnOutput(self, f"{name.capitalize()}Image", value=self.builds.resource.get_att_string(f"{name}ImageUri"))
        if self.builds.routing_controller_project is not None:
            CfnOutput(
                self,
                "RoutingControllerImage",
                value=self.builds.resource.get_att_string(f"{ROUTING_CONTROLLER_BUILD}ImageUri"),
            )
