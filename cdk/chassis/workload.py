"""The `Workload` contract: all the serving stack knows of a workload (cdk/image/serving.py is one).

The serving stack owns the chassis: the model store, the namespace and its default-deny NetworkPolicy, KEDA's
TriggerAuthentication, the front door (Ingress, WAF, CloudFront or the ALB's HTTPS, sign-in), one routing
controller per weighted action, the dashboard and the alarms. It walks its list of workloads at each of its
stages and asks each for its part, in this order:

1. `stage`: what the workload stores and who may read it (weights staging, buckets, queues, IAM roles), before
   any Kubernetes object; it returns the buckets to empty if the stack's creation rolls back, and the writers
   that must be deleted before that emptier runs;
2. `network_policies`: what its pods admit, applied with the namespace's default deny before any pod;
3. `deploy`: what needs the namespace (a compile Job), given the stack's manifest factory;
4. `service_manifests`: what the Ingress and its pods refer to (ServiceAccounts, Services, PDBs), before the Ingress;
5. `routes`: its paths at the front door and their weighted action or capacity Service, and pool routes (paths,
   or a header, to a subset of its pools by fixed actions);
6. `routing_controller`: the pools its weighted action moves between, when a controller runs;
7. `pod_manifests`: its Deployments and ScaledObjects, applied last (after the Ingress's target groups exist);
8. `dashboard` / `alarms` / `outputs`: its dashboard rows, its alarms, its stack outputs.

Construct ids: a workload creates its constructs in `ctx.scope` (the stack) under ids of its own. Ids are the
logical ids of deployed resources: a workload that moves keeps them, or the user's resources are replaced.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.config.serving import ServingConfig
from cdk.constructs.image_builds import SmallImage
from cdk.front_door.routes import Routes
from cdk.front_door.routing_controller import RoutedAction
from cdk.observability.sections import Observed
from cdk.platform_handle import PlatformHandle
from cdk.serving.model_store import ModelStore

Manifest = dict[str, Any]
ManifestFactory = Callable[..., eks.KubernetesManifest]


@dataclass(frozen=True)
class StageContext:
    """What every stage of a workload is given: the stack to create in, the settings, the platform, the store."""

    scope: Stack
    cfg: ServingConfig
    platform: PlatformHandle
    store: ModelStore


@dataclass(frozen=True)
class Staged:
    """What `stage` created that the stack must know of."""

    buckets: Sequence[s3.IBucket] = ()  # emptied if the stack's creation rolls back
    writers: Sequence[Construct] = ()  # write into the buckets: deleted before the emptier


@dataclass(frozen=True)
class DeployContext(StageContext):
    """`StageContext` and the namespace's parts the Kubernetes stages need."""

    manifest: ManifestFactory  # manifest(cid, objects, *deps): objects applied in the serving namespace
    network_policies: Construct  # the namespace's NetworkPolicies: applied before any pod
    load_balancer_cidrs: Sequence[str]  # the load balancer's subnets, the only peers the pods admit
    env_config_maps: tuple[str, ...]  # ConfigMaps every serving pod reads its sign-in settings from


@dataclass(frozen=True)
class ManifestSpec:
    """Objects the stack applies as one manifest, under construct id `cid`, after `deps`."""

    cid: str
    objects: list[Manifest]
    deps: Sequence[Construct] = ()


@dataclass(frozen=True)
class RoutingControllerSpec:
    """One routing controller instance for a workload's weighted action."""

    construct_prefix: str  # <prefix>RoutingController, <prefix>RoutingControllerIdentity
    routed: RoutedAction
    description: str  # its IAM role's description


class Workload(Observed):
    """A workload on the chassis; see the module's docstring for the order the stack calls these in."""

    name: str  # short and unique among the stack's workloads, for messages

    def images(self) -> Sequence[SmallImage]:
        """Images of ours (beside the service image per accelerator) it runs; built by the images stack."""
        return ()

    def neuron_devices_per_pod(self) -> int:
        """The most Neuron devices one of its pods asks for (more than one needs the Neuron scheduler)."""
        return 0

    @abstractmethod
    def stage(self, ctx: StageContext) -> Staged:
        """Create what it stores and its identities."""

    def network_policies(self, ctx: StageContext, load_balancer_cidrs: Sequence[str]) -> list[Manifest]:
        """NetworkPolicies applied with the namespace's default deny, before any pod."""
        return []

    def deploy(self, ctx: DeployContext) -> None:
        """Create what needs the namespace before the Services (a compile Job)."""

    @abstractmethod
    def service_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """ServiceAccounts, Services, PodDisruptionBudgets: applied before the Ingress."""

    @abstractmethod
    def routes(self, ctx: StageContext) -> Routes:
        """Its paths at the front door."""

    def routing_controller(self, ctx: StageContext) -> RoutingControllerSpec | None:
        """Its routing controller instance (cost-with-failover), if its routes are weighted."""
        return None

    @abstractmethod
    def pod_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Deployments and ScaledObjects: applied last."""

    def kept_up(self) -> Sequence[tuple[str, float]]:
        """What it keeps running with no traffic, priced from its own settings: (item, USD an hour) each; the cost
        at rest (cdk/costs/at_rest.py) adds them to the platform's."""
        return ()

    def outputs(self, ctx: StageContext, public_url: str) -> None:
        """Its stack outputs, once the public URL is known."""
