"""Service images: ECR repository, app source asset, one CodeBuild project per accelerator, and a
chain of custom resources that runs the builds during `cdk deploy` and waits for them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import deploy_limits, versions
from cdk.config import AcceleratorCapacity
from cdk.constructs.build_runner import build_runner
from cdk.constructs.log_groups import encrypted_log_group
from cdk.retention import RETAINED

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILDSPEC = "buildspecs/image.yml"
# Every image copies the shared runtime, common/, whole, beside its own package.
SHARED_RUNTIME = ["!common", "!common/**"]
# The Dockerfile builds with the repository root as context but needs only app/ (its locks are under
# app/requirements/), common/ and its buildspec: a change anywhere else (the tests' or the CDK's requirements, the
# other images' buildspecs) leaves the image's tag, and so the image, as it is.
SOURCE_EXCLUDES = [
    "*",
    ".*",  # "*" does not match dot-files (.git, caches)
    "!app",
    "!app/**",
    *SHARED_RUNTIME,
    "!buildspecs",
    f"!{BUILDSPEC}",
    "**/__pycache__",
    "**/*.pyc",
]
# The routing controller's image: its own package, the shared runtime and its buildspec only, so a change to the
# service does not rebuild it and it does not carry the service.
ROUTING_CONTROLLER_BUILD = "routingController"  # its `Accelerator` key in the custom resource's Builds
ROUTING_CONTROLLER_KIND = "routing-controller"  # its tag prefix, beside the accelerators' names
ROUTING_CONTROLLER_BUILDSPEC = "buildspecs/routing-controller.yml"
ROUTING_CONTROLLER_EXCLUDES = [
    "*",
    ".*",
    "!routing_controller",
    "!routing_controller/**",
    *SHARED_RUNTIME,
    "!buildspecs",
    f"!{ROUTING_CONTROLLER_BUILDSPEC}",
    "**/__pycache__",
    "**/*.pyc",
]


@dataclass(frozen=True)
class SmallImage:
    """An image of ours on a slim Python base (not the service's DLC): its own package and buildspec."""

    kind: str  # tag prefix, beside the accelerators' names (and its lifecycle rule's)
    build: str  # its `Accelerator` key in the custom resource's Builds (and `<build>ImageUri`)
    construct_prefix: str  # its constructs' ids: <prefix>Source, <prefix>Build
    buildspec: str
    excludes: list[str]  # the build context: everything else is left out of its source asset
    base_image: str  # an input of its tag too: a new base rebuilds it
    description: str


ROUTING_CONTROLLER_IMAGE = SmallImage(
    kind=ROUTING_CONTROLLER_KIND,
    build=ROUTING_CONTROLLER_BUILD,
    construct_prefix="RoutingController",
    buildspec=ROUTING_CONTROLLER_BUILDSPEC,
    excludes=ROUTING_CONTROLLER_EXCLUDES,
    base_image=versions.ROUTING_CONTROLLER_BASE_IMAGE,
    description="the routing controller image",
)
ECR_REGISTRY = re.compile(r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")
# Each image kind keeps its own newest images: a rule over the whole repository would let a few service
# changes (two images each) age out the routing controller's image, which changes rarely, while deployed.
# The deployed image of a kind is its newest unless later deploys of that kind failed; the one before
# it is what a rollback returns to.
KEEP_IMAGES_PER_KIND = 10
UNTAGGED_IMAGE_DAYS = 1  # tags are immutable, so an untagged image is a leftover of an interrupted push


def tag_prefix(kind: str) -> str:
    """What every tag of one image kind (an accelerator, or the routing controller) starts with."""
    return f"{kind}-"


def lifecycle_rules(kinds: list[str]) -> list[ecr.LifecycleRule]:
    """Keep the KEEP_IMAGES_PER_KIND newest images of each kind, counted per kind; drop untagged leftovers.

    Images of kinds not listed (an accelerator turned off) are never expired. ECR applies at most one
    rule to an image, the first by priority whose selection it matches (Amazon ECR User Guide,
    lifecycle policy properties and evaluation).
    """
    rules = [
        ecr.LifecycleRule(
            rule_priority=priority,
            description=f"Keep the {KEEP_IMAGES_PER_KIND} newest {kind} images",
            tag_status=ecr.TagStatus.TAGGED,
            tag_prefix_list=[tag_prefix(kind)],
            max_image_count=KEEP_IMAGES_PER_KIND,
        )
        for priority, kind in enumerate(kinds, start=1)
    ]
    rules.append(
        ecr.LifecycleRule(
            rule_priority=len(kinds) + 1,
            description="Drop untagged images (left by interrupted pushes)",
            tag_status=ecr.TagStatus.UNTAGGED,
            max_image_age=Duration.days(UNTAGGED_IMAGE_DAYS),
        )
    )
    return rules


def build_args(accelerator: str) -> dict[str, str]:
    """The `docker build --build-arg`s of one accelerator's image (besides BASE_IMAGE), from cdk/versions.py."""
    args = {"ACCELERATOR": accelerator}
    if accelerator == "neuron":
        # The Dockerfile has no default for it, so the pin lives in versions.py alone.
        args["OPTIMUM_NEURON_VERSION"] = versions.OPTIMUM_NEURON_VERSION
    return args


def image_tag(accelerator: str, *, source_hash: str, base_image: str, args: Mapping[str, str]) -> str:
    """`<accelerator>-<sha256>` of everything that goes into the image, so that any change rebuilds it.

    `source_hash` covers the asset (app/, common/, the Dockerfile, the requirement and lock files, the
    buildspec); `base_image` is the base as configured (already resolved for the stack's region);
    `args` are the build args. Tags are immutable: an unchanged input set reuses the pushed image.
    """
    inputs = {"source": source_hash, "base_image": base_image, "build_args": dict(sorted(args.items()))}
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"{tag_prefix(accelerator)}{digest}"


def repository_name(cluster_name: str) -> str:
    """The ECR repository's name; fixed, so image URIs are known at synth time without exports."""
    return f"{cluster_name.lower()}/stable-diffusion"


def image_uri(cluster_name: str, tag: str) -> str:
    """An image URI built from pseudo parameters, so another stack can use it without an export
    (an export whose value changes on every code change could not be updated while imported)."""
    return f"{Aws.ACCOUNT_ID}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{repository_name(cluster_name)}:{tag}"


class ImageBuilds(Construct):
    """Builds `app/Dockerfile` for every enabled accelerator and exposes the pushed image URIs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        capacity: tuple[AcceleratorCapacity, ...],
        small_images: Sequence[SmallImage] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        kinds = [item.name for item in capacity] + [image.kind for image in small_images]
        self.repository = ecr.Repository(
            self,
            "Repository",
            repository_name=repository_name(cluster_name),
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS,
            lifecycle_rules=lifecycle_rules(kinds),
            # The name is fixed (image URIs are built from it without an export), so a repository left
            # behind by a rolled-back first deploy would block the next one. Images are rebuilt from
            # source, so deleting them with the stack loses nothing (CloudFormation's EmptyOnDelete).
            removal_policy=RemovalPolicy.DESTROY,
            empty_on_delete=True,
        )
        self.source = s3_assets.Asset(self, "Source", path=str(REPO_ROOT), exclude=SOURCE_EXCLUDES)
        source_hash = self.source.asset_hash

        self.artifacts_key = kms.Key(
            self,
            "BuildKey",
            description="Encrypts the image builds' artifacts and logs",
            enable_key_rotation=True,
            removal_policy=RETAINED,
        )
        self.projects: dict[str, codebuild.Project] = {}
        self.image_uris: dict[str, str] = {}
        builds = []
        for item in capacity:
            args = build_args(item.name)
            tag = image_tag(item.name, source_hash=source_hash, base_image=item.base_image, args=args)
            project = self._project(item, tag=tag, region=region, args=args)
            self.projects[item.name] = project
            self.image_uris[item.name] = image_uri(cluster_name, tag)
            builds.append(
                {
                    "Project": project.project_name,
                    "Accelerator": item.name,
                    "ImageUri": self.repository.repository_uri_for_tag(tag),
                }
            )
        # The small images: kind -> their project and the URI they push.
        self.small_projects: dict[str, codebuild.Project] = {}
        self.small_image_uris: dict[str, str] = {}
        for image in small_images:
            source = s3_assets.Asset(
                self, f"{image.construct_prefix}Source", path=str(REPO_ROOT), exclude=image.excludes
            )
            tag = image_tag(image.kind, source_hash=source.asset_hash, base_image=image.base_image, args={})
            project = self._small_image_project(image, source, tag=tag)
            self.small_projects[image.kind] = project
            self.small_image_uris[image.kind] = image_uri(cluster_name, tag)
            builds.append(
                {
                    "Project": project.project_name,
                    "Accelerator": image.build,
                    "ImageUri": self.repository.repository_uri_for_tag(tag),
                }
            )

        runner = build_runner(
            self,
            projects=[*self.projects.values(), *self.small_projects.values()],
            what="image builds",
            # Each wait resource answers inside CloudFormation's one-hour limit (cdk/deploy_limits.py).
            wait=deploy_limits.IMAGE_BUILD_WAIT,
            report_after=deploy_limits.IMAGE_BUILD_REPORT_AFTER,
            repository=self.repository,
        )
        self.on_event, self.is_complete, provider = runner.on_event, runner.is_complete, runner.provider
        self.resource = self._wait_chain(provider, {"Builds": builds, "SourceHash": source_hash})

    def _wait_chain(self, provider: cr.Provider, properties: dict[str, object]) -> CustomResource:
        """The resources that start the builds and wait for them, each after the one before; the last.

        A first deploy must outwait a long first build: were the stack to fail, its rollback would
        delete the repository and the build's role while the build still runs. One resource may wait
        an hour at most, so IMAGE_BUILD_WAIT_STAGES of them wait in turn, together longer than any
        build can be queued and run (lambdas/codebuild_runner.py).
        """
        stages = deploy_limits.IMAGE_BUILD_WAIT_STAGES

        def stage_resource(stage: int) -> CustomResource:
            return CustomResource(
                self,
                "Images" if stage == 1 else f"Wait{stage}",
                service_token=provider.service_token,
                resource_type="Custom::ImageBuilds",
                properties={**properties, "WaitStage": stage, "WaitStages": stages},
            )

        last = stage_resource(1)
        for stage in range(2, stages + 1):
            waiter = stage_resource(stage)
            waiter.node.add_dependency(last)
            last = waiter
        return last

    def _docker_build_project(
        self,
        construct_id: str,
        *,
        description: str,
        source: s3_assets.Asset,
        buildspec: str,
        compute_type: codebuild.ComputeType,
        timeout: Duration,
        variables: dict[str, str],
    ) -> codebuild.Project:
        """A privileged project that runs `buildspec` from `source` and pushes to the repository."""
        project = codebuild.Project(
            self,
            construct_id,
            description=description,
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            build_spec=codebuild.BuildSpec.from_source_filename(buildspec),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.from_code_build_image_id(versions.CODEBUILD_IMAGE),
                compute_type=compute_type,
                privileged=True,  # docker build needs the Docker daemon
            ),
            environment_variables={
                name: codebuild.BuildEnvironmentVariable(value=value)
                for name, value in {"REPOSITORY_URI": self.repository.repository_uri, **variables}.items()
            },
            encryption_key=self.artifacts_key,
            logging=codebuild.LoggingOptions(
                cloud_watch=codebuild.CloudWatchLoggingOptions(
                    log_group=encrypted_log_group(self, f"{construct_id}Logs")
                )
            ),
            timeout=timeout,
            queued_timeout=deploy_limits.IMAGE_BUILD_QUEUE_TIMEOUT,
        )
        self.repository.grant_pull_push(project)
        self.repository.grant_read(project)  # ecr:DescribeImages for the "already pushed" check
        return project

    def _project(
        self, item: AcceleratorCapacity, *, tag: str, region: str, args: Mapping[str, str]
    ) -> codebuild.Project:
        """A privileged project that builds and pushes one accelerator's image."""
        base_image = item.base_image
        dlc_registry = base_image.split("/", 1)[0]
        project = self._docker_build_project(
            f"{item.name.capitalize()}Build",
            description=f"Builds the {item.name} service image on {base_image}",
            source=self.source,
            buildspec=BUILDSPEC,
            compute_type=codebuild.ComputeType.X_LARGE,
            timeout=deploy_limits.IMAGE_BUILD_TIMEOUT,
            # the build args the tag hashes (ACCELERATOR, OPTIMUM_NEURON_VERSION)
            variables={"IMAGE_TAG": tag, "BASE_IMAGE": base_image, "DLC_REGISTRY": dlc_registry, **args},
        )
        # Pull the DLC base: the DLC registry is another AWS account; scope to the base's repository.
        # (A base image from a public registry needs no permission.)
        dlc_account = dlc_registry.split(".", 1)[0]
        dlc_repository = base_image.split("/", 1)[1].rsplit(":", 1)[0]
        if ECR_REGISTRY.fullmatch(dlc_registry):
            project.add_to_role_policy(
                iam.PolicyStatement(
                    sid="PullDeepLearningContainerBase",
                    actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                    resources=[f"arn:{Aws.PARTITION}:ecr:{region}:{dlc_account}:repository/{dlc_repository}"],
                )
            )
        return project

    def _small_image_project(self, image: SmallImage, source: s3_assets.Asset, *, tag: str) -> codebuild.Project:
        """A small privileged project that builds one of our own images on a slim Python base."""
        return self._docker_build_project(
            f"{image.construct_prefix}Build",
            description=f"Builds {image.description} on {image.base_image}",
            source=source,
            buildspec=image.buildspec,
            compute_type=codebuild.ComputeType.SMALL,
            timeout=deploy_limits.SMALL_IMAGE_BUILD_TIMEOUT,
            variables={"IMAGE_TAG": tag, "BASE_IMAGE": image.base_image},
        )
