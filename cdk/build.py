"""Assembles the app: reads the config, picks the workloads (cdk/composition.py), creates the platform and
serving stacks, wires the checks.

`build_app` is the one entry point (app.py and the tests both call it), so what the tests
synthesize is exactly what `cdk deploy` deploys.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from cdk.chassis.workload import Workload
from cdk.checkov import CustomResourceHandlerSkips
from cdk.composition import apply_catalog_defaults, workloads_for
from cdk.config import AppConfig
from cdk.config.profiles import apply_profile
from cdk.platform_checks import add_nag_checks
from cdk.platform_handle import PlatformHandle
from cdk.platform_stacks import PlatformStacks
from cdk.stacks.cluster_additions_stack import ClusterAdditionsStack
from cdk.stacks.cluster_stack import ClusterStack
from cdk.stacks.images_stack import ImagesStack
from cdk.stacks.network_stack import NetworkStack
from cdk.stacks.serving_stack import ServingStack

STACK_PREFIX = "SdOnEks"
CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"


def project_defaults() -> dict[str, Any]:
    """cdk.json's context: the values a profile replaces (a key set to anything else is the user's)."""
    return dict(json.loads(CDK_JSON.read_text())["context"])


def read_config(app: cdk.App) -> AppConfig:
    """The AppConfig from the app's context (a `profile`'s and the image model's defaults applied first), with
    account/region from the CLI's environment."""
    return AppConfig.from_context(resolve_context(app.node.get_all_context()), os.environ)


def resolve_context(context: dict[str, Any]) -> dict[str, Any]:
    """The context with a `profile`'s defaults, then the image model preset's (`imageModel`), in place of cdk.json's
    values where the user gave none of their own."""
    defaults = project_defaults()
    return apply_catalog_defaults(apply_profile(context, defaults), defaults)


def environment(config: AppConfig) -> cdk.Environment:
    """Always explicit: the log-bucket principal, DLC registry and AZs all depend on the region."""
    return cdk.Environment(account=config.account, region=config.region)


EXAMPLE_WARNING = (
    "synthesized for the EXAMPLE environment {account}/{region} (exampleEnvironment=true, no account "
    "found): NOT deployable. Run the CDK CLI with credentials (CDK_DEFAULT_ACCOUNT) or pass -c account=... "
    "-c region=..."
)


def mark_example(stacks: Sequence[cdk.Stack], config: AppConfig) -> None:
    """Say that the stacks target the example environment: an output in every template, and one synth warning
    (the CLI prints a warning once per stack that carries it; once is enough to read)."""
    message = EXAMPLE_WARNING.format(account=config.account, region=config.region)
    cdk.Annotations.of(stacks[0]).add_warning_v2("sd-on-eks:exampleEnvironment", message)
    for stack in stacks:
        cdk.CfnOutput(stack, "ExampleEnvironment", value=message, description="This template is not deployable")


def build_platform(app: cdk.App, config: AppConfig, workloads: Sequence[Workload]) -> PlatformStacks:
    """Create the network, cluster and image stacks for the config and what its workloads need of them; on a
    team's cluster (existingClusterName) the stack of what we add to it in place of the network and cluster."""
    env = environment(config)
    network = None
    neuron_devices = max(w.neuron_devices_per_pod() for w in workloads)
    cluster: ClusterStack | ClusterAdditionsStack
    if config.existing_cluster is not None:
        cluster = ClusterAdditionsStack(
            app,
            f"{STACK_PREFIX}ClusterAdditions",
            config=config,
            existing=config.existing_cluster,
            neuron_devices_per_pod=neuron_devices,
            env=env,
        )
    else:
        if config.vpc_id is None:
            network = NetworkStack(app, f"{STACK_PREFIX}Network", config=config, env=env)
        cluster = ClusterStack(
            app,
            f"{STACK_PREFIX}Cluster",
            config=config,
            vpc=network.vpc if network else None,
            neuron_devices_per_pod=neuron_devices,
            env=env,
        )
    images = ImagesStack(
        app, f"{STACK_PREFIX}Images", config=config, workload_images=[i for w in workloads for i in w.images()], env=env
    )
    handle = PlatformHandle(
        cluster=cluster.cluster,
        vpc=cluster.vpc,
        kubernetes_version=config.kubernetes_version,
        accelerators=config.accelerators,
        image_uris=dict(images.image_uris),
        routing_controller_image=images.routing_controller_image,
        small_image_uris=dict(images.builds.small_image_uris),
        keda_operator_role=cluster.keda.operator_role if cluster.keda is not None else None,
    )
    return PlatformStacks(env=env, network=network, cluster=cluster, images=images, handle=handle)


def build_app(app: cdk.App, config: AppConfig, workloads: Sequence[Workload] | None = None) -> PlatformHandle:
    """Build every stack of the app onto `app` and return what the serving stack receives. `workloads`: what to
    serve, by default the composition root's choice for `config` (`workloads_for`)."""
    workloads = workloads_for(config) if workloads is None else workloads
    platform = build_platform(app, config, workloads)
    serving = ServingStack(
        app,
        f"{STACK_PREFIX}Serving",
        config=config.serving,
        workloads=workloads,
        platform=platform.handle,
        env=platform.env,
    )
    platform.add_workload(serving)
    if config.environment.example:
        mark_example(
            [s for s in (platform.network, platform.cluster, platform.images, serving) if s is not None], config
        )
    add_nag_checks(app, platform)
    cdk.Aspects.of(app).add(CustomResourceHandlerSkips())
    return platform.handle
