"""The image service on the chassis (`Workload`): its weights staging, async jobs, Neuron compile Job, identities,
per-accelerator objects, routes (`/`: whatever other workloads' exact paths do not take), routing controller,
dashboard rows, alarms and outputs.

Its constructs keep the ids (and so the logical ids) they had when the serving stack built them inline:
`WeightsStaging`, `Jobs`, `NeuronCompileIdentity`, `<Acc>Identity`, `<Acc>Service`, `<Acc>Workload`, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.accelerators import Accelerator
from cdk.chassis.workload import (
    DeployContext,
    Manifest,
    ManifestSpec,
    RoutingControllerSpec,
    StageContext,
    Staged,
    Workload,
)
from cdk.config.serving import WEIGHTED_MODES, ServingConfig
from cdk.constructs.image_builds import SmallImage
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.front_door.routes import Routes
from cdk.front_door.routing_controller import RoutedAction, pools
from cdk.image import neuron_compile_job as njob
from cdk.image import starting_gate, workload
from cdk.image.jobs import JOBS_PREFIX, JobsInfra
from cdk.image.observability import ImageObservability, JobQueues
from cdk.image.pool_routes import pool_routes
from cdk.image.scaling import scaled_object
from cdk.observability.sections import AlarmSection, DashboardSection, DashboardView
from cdk.serving import network_policy
from cdk.serving.model_staging import WeightsStaging
from cdk.serving.routing import WEIGHT_TOTAL, CostInput, resolve_weights
from cdk.serving.service_identity import (
    acknowledge_prefix_wildcards,
    put_metrics_statement,
    read_statements,
    write_statement,
)
from common import metric_names
from common.image_api_paths import GENERATE_PATH, IMAGES_EDITS_PATH, IMAGES_GENERATIONS_PATH, JOBS_PATH
from common.model_store.layout import is_s3_uri, loras_prefix, s3_uri, weights_location
from routing_controller.decision import normalize

# The image routes' weighted action (cost modes) and the routing controller instance that moves it.
WEIGHTED_ACTION_NAME: Final = "weighted"
ROUTING_CONTROLLER_NAME: Final = "sd-routing-controller"
# Everything the other workloads' exact paths do not take: the UI, /v1/generate, /v1/jobs, the Images API.
PATHS: Final = ("/",)
# The POSTs whose bodies are prompts and images, left alone by the WAF's common rule set (cdk/front_door/waf.py),
# whose body rules block any body over 8 KB with a bare 403: OpenAI's Images API (its callers expect the service's
# own body limits and its OpenAI-shaped 413), its edits (an image and a mask of up to MAX_UPLOAD_BYTES each), and
# /v1/generate and /v1/jobs, whose edits carry their images as base64 (within MAX_BODY_BYTES). The service bounds
# and checks every upload before it decodes it (app/edit_inputs.py).
PROMPT_PATHS: Final = (IMAGES_GENERATIONS_PATH, IMAGES_EDITS_PATH, GENERATE_PATH, JOBS_PATH)


def routed_accelerators(cfg: ServingConfig, accelerators: Sequence[Accelerator]) -> tuple[Accelerator, ...]:
    """The accelerators the ALB sends requests to: async-only ones take jobs from the queue, never requests."""
    return tuple(a for a in accelerators if not cfg.per_accelerator[a.name].async_only)


def routing_weights(cfg: ServingConfig, accelerators: Sequence[Accelerator]) -> dict[str, int] | None:
    """Service name -> weight in the weighted modes (the cost weights); None in capacity mode and behind the starting
    gate (its one Service takes all)."""
    if cfg.routing_mode not in WEIGHTED_MODES or cfg.starting_gate:
        return None
    per = cfg.per_accelerator
    accelerators = routed_accelerators(cfg, accelerators)
    weights = resolve_weights(
        accelerators,
        {a.name: per[a.name].routing_weight for a in accelerators},
        {a.name: CostInput(per[a.name].price_per_hour, per[a.name].seconds_per_image) for a in accelerators},
    )
    if cfg.runs_routing_controller:
        # The controller's weights sum to WEIGHT_TOTAL; explicit weights are scaled to the same total
        # so that the deployed Ingress already carries what the controller sets while all is healthy.
        weights = normalize({name: float(w) for name, w in weights.items()}, WEIGHT_TOTAL)
    return {workload.deployment_name(a): weights[a.name] for a in accelerators}


def image_routing(accelerators: Sequence[Accelerator], cost_weights: dict[str, int]) -> RoutedAction:
    """The image routes' controller instance: `sd-routing-controller` moving the `weighted` action."""
    return RoutedAction(
        name=ROUTING_CONTROLLER_NAME,
        action=WEIGHTED_ACTION_NAME,
        pools=pools(accelerators, cost_weights, workload.deployment_name),
    )


class ImageServing(Workload):
    """The image-generation service (app/) on every enabled accelerator."""

    name = "image"

    def __init__(self, cfg: ServingConfig) -> None:
        self.cfg = cfg
        self.compile_job: eks.KubernetesManifest | None = None

    def images(self) -> Sequence[SmallImage]:
        """The starting gate's image, when it fronts the pool (servingStartingGate)."""
        return (starting_gate.STARTING_GATE_IMAGE,) if self.cfg.starting_gate else ()

    def kept_up(self) -> Sequence[tuple[str, float]]:
        """Its pods that stay up at rest (`scalingMinReplicas<Acc>`), at `costPricePerHour<Acc>`."""
        return [
            (f"{per.min_replicas} x {name} image pod kept up", per.min_replicas * per.price_per_hour)
            for name, per in self.cfg.per_accelerator.items()
            if per.min_replicas
        ]

    def neuron_devices_per_pod(self) -> int:
        """`neuronDevices` of the image service's Neuron pods."""
        return self.cfg.neuron_devices

    def stage(self, ctx: StageContext) -> Staged:
        """The weights (staged from the Hub, or brought), the job queue and results bucket, KEDA's read of it."""
        stack, cfg, bucket = ctx.scope, ctx.cfg, ctx.store.bucket
        self.accelerators = ctx.platform.accelerators
        self.weights = routing_weights(cfg, self.accelerators)
        self.weights_bucket_name, self.weights_key = weights_location(cfg.model_id, bucket.bucket_name)
        self.weights_bucket: s3.IBucket = (
            s3.Bucket.from_bucket_name(stack, "BroughtWeights", self.weights_bucket_name)
            if is_s3_uri(cfg.model_id)
            else bucket
        )
        self.staging = (
            WeightsStaging(
                stack,
                "WeightsStaging",
                bucket=bucket,
                model_id=cfg.model_id,
                revision=cfg.model_revision,
                token_secret=cfg.hub_token_secret,
            )
            if cfg.stages_weights
            else None
        )
        self.after_weights: list[Construct] = [self.staging.resource] if self.staging is not None else []
        self.jobs = JobsInfra(
            stack, "Jobs", config=cfg.jobs, log_bucket=ctx.store.log_bucket, retain=cfg.model_store_retain
        )
        if ctx.platform.keda_operator_role is not None:
            iam.Policy(
                stack,
                "KedaReadsJobQueue",
                roles=[ctx.platform.keda_operator_role],
                statements=[self.jobs.scaler_statement()],
            )
        return Staged(buckets=[self.jobs.bucket], writers=self.after_weights)

    def network_policies(self, ctx: StageContext, load_balancer_cidrs: Sequence[str]) -> list[Manifest]:
        """The image pods admit the service port from the load balancer's subnets (and from the starting gate, which
        admits the load balancer's subnets, when it fronts them)."""
        policies = [network_policy.allow_service_port(ctx.cfg, load_balancer_cidrs, pods=workload.APP_LABEL)]
        if ctx.cfg.starting_gate:
            policies += starting_gate.network_policies(ctx.cfg, load_balancer_cidrs, workload.APP_LABEL)
        return policies

    def deploy(self, ctx: DeployContext) -> None:
        """The Neuron compile Job (with Neuron enabled), after the weights and the NetworkPolicies."""
        stack, cfg, bucket = ctx.scope, ctx.cfg, ctx.store.bucket
        neuron = next((a for a in self.accelerators if a.name == "neuron"), None)
        if neuron is None:
            return
        prefix = njob.artifact_prefix(cfg)
        adapters = loras_prefix(cfg.model_id)
        compile_role = PodIdentityRole(
            stack,
            "NeuronCompileIdentity",
            cluster=ctx.platform.cluster,
            namespace=cfg.namespace,
            service_account=njob.SERVICE_ACCOUNT,
            statements=[*self._read_weights_and(bucket, [prefix, adapters]), write_statement(bucket, prefix)],
            description="Neuron compile job: read the model's weights and adapters, write its compiled artifacts",
        )
        self._acknowledge_reads(compile_role, bucket, self.weights_bucket, self.weights_key, [prefix, adapters])
        compile_args = {
            "image": ctx.platform.image_uris[neuron.name],
            "bucket": bucket.bucket_name,
            "region": stack.region,
        }
        self.compile_job = ctx.manifest(
            "NeuronCompileJob",
            [
                njob.compile_service_account(cfg),
                njob.compile_job(cfg, **compile_args),
                njob.rerun_cronjob(cfg, **compile_args),
            ],
            compile_role.association,
            ctx.network_policies,
            *self.after_weights,
        )

    def service_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Per accelerator: its identity now; its ServiceAccount, Service and PodDisruptionBudget before the Ingress."""
        stack, cfg, bucket = ctx.scope, ctx.cfg, ctx.store.bucket
        self.identities: dict[str, PodIdentityRole] = {}
        self._pods: list[ManifestSpec] = []
        specs = []
        for acc in self.accelerators:
            # Neuron pods load the compiled artifacts from the store; GPU pods the weights, wherever they are.
            model_bucket, prefix = (
                (bucket, njob.artifact_prefix(cfg)) if acc.name == "neuron" else (self.weights_bucket, self.weights_key)
            )
            # Every pod also mirrors the model's LoRA adapters (LORA_DIR), which the model store keeps beside it.
            adapters = loras_prefix(cfg.model_id)
            reads = (
                read_statements(bucket, [prefix, adapters])
                if model_bucket is bucket
                else self._read_weights_and(bucket, [adapters])
            )
            identity = PodIdentityRole(
                stack,
                f"{acc.name.capitalize()}Identity",
                cluster=ctx.platform.cluster,
                namespace=cfg.namespace,
                service_account=workload.service_account_name(acc),
                statements=[*reads, put_metrics_statement(metric_names.NAMESPACE)],
                description=f"{workload.deployment_name(acc)}: read {prefix} and {adapters} of the model store, "
                "publish service metrics",
            )
            self._acknowledge_reads(identity, bucket, model_bucket, prefix, [adapters], metrics=True)
            self._grant_jobs(stack, identity)
            self.identities[acc.name] = identity
            image = ctx.platform.image_uris[acc.name]
            init = (
                [njob.wait_init_container(cfg, image=image, bucket=bucket.bucket_name, region=stack.region)]
                if acc.name == "neuron"
                else []
            )
            specs.append(
                ManifestSpec(
                    f"{acc.name.capitalize()}Service",
                    [
                        workload.service_account(acc, cfg),
                        workload.accelerator_service(acc, cfg),
                        workload.pod_disruption_budget(acc, cfg),
                    ],
                )
            )
            pods = [
                workload.deployment(
                    acc,
                    cfg,
                    image=image,
                    model_uri=s3_uri(model_bucket.bucket_name, prefix),
                    region=stack.region,
                    lora_uri=s3_uri(bucket.bucket_name, adapters),
                    init_containers=init,
                    env_config_maps=ctx.env_config_maps,
                    extra_env=self.jobs.service_env(),
                ),
                scaled_object(acc, cfg, stack.region, self.jobs.queue.queue_url),
            ]
            # GPU pods load the weights at start, Neuron pods wait for the compile that needs them: neither
            # is applied before the weights are staged.
            self._pods.append(
                ManifestSpec(
                    f"{acc.name.capitalize()}Workload",
                    pods,
                    [identity.association, ctx.network_policies, *self.after_weights],
                )
            )
        return specs

    def routes(self, ctx: StageContext) -> Routes:
        """`/` to the `weighted` action (cost modes), to the Service over every image pod (capacity), or to the
        starting gate in front of the pool (servingStartingGate); on a mixed pool, edits to the pools that run them
        and requests with `X-Image-Pool` to the pool they name (cdk/image/pool_routes.py)."""
        if ctx.cfg.starting_gate:
            return Routes(
                paths=PATHS,
                path_type="Prefix",
                action=WEIGHTED_ACTION_NAME,
                weights=None,
                capacity_service=starting_gate.NAME,
                prompt_paths=PROMPT_PATHS,
                objects=starting_gate.service_objects(ctx.cfg),
            )
        return Routes(
            paths=PATHS,
            path_type="Prefix",
            action=WEIGHTED_ACTION_NAME,
            weights=self.weights,
            capacity_service=workload.CAPACITY_SERVICE_NAME,
            prompt_paths=PROMPT_PATHS,
            objects=[] if self.weights is not None else [workload.capacity_service(ctx.cfg)],
            pool_routes=pool_routes(routed_accelerators(ctx.cfg, self.accelerators), self.weights, PATHS),
        )

    def routing_controller(self, ctx: StageContext) -> RoutingControllerSpec | None:
        """`sd-routing-controller` over the accelerators with a cost weight."""
        if self.weights is None:
            return None
        return RoutingControllerSpec(
            construct_prefix="",
            routed=image_routing(self.accelerators, self.weights),
            description="Routing controller: publish the RoutingWeight metric",
        )

    def pod_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Per accelerator: the Deployment and its ScaledObject; the starting gate's Deployment when it fronts them."""
        if not ctx.cfg.starting_gate:
            return self._pods
        return [*self._pods, self._starting_gate(ctx)]

    def _starting_gate(self, ctx: DeployContext) -> ManifestSpec:
        """The gate's Deployment and its identity: PutMetricData to the service's namespace (the demand it sees)."""
        stack, cfg = ctx.scope, ctx.cfg
        identity = PodIdentityRole(
            stack,
            "StartingGateIdentity",
            cluster=ctx.platform.cluster,
            namespace=cfg.namespace,
            service_account=starting_gate.NAME,
            statements=[put_metrics_statement(metric_names.NAMESPACE)],
            description="Starting gate: publish the demand it answered 'starting' to",
        )
        Validations.of(identity).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData has no resource-level scoping; it is limited by the "
                "cloudwatch:namespace condition to the service's own namespace.",
            )
        )
        (acc,) = self.accelerators
        image = ctx.platform.small_image_uris[starting_gate.STARTING_GATE_IMAGE.kind]
        return ManifestSpec(
            "StartingGate",
            [starting_gate.deployment(acc, cfg, image=image, region=stack.region, env_config_maps=ctx.env_config_maps)],
            [identity.association, ctx.network_policies],
        )

    def outputs(self, ctx: StageContext, public_url: str) -> None:
        """The URL of the UI, the weights and (Neuron) compiled artifacts, the job topic and dead letters."""
        stack, cfg, bucket = ctx.scope, ctx.cfg, ctx.store.bucket
        CfnOutput(
            stack, "ServiceUrl", value=f"{public_url}/", description="The Gradio UI and /v1/generate (sign-in required)"
        )
        CfnOutput(stack, "ModelWeightsUri", value=s3_uri(self.weights_bucket_name, self.weights_key))
        if self.compile_job is not None:
            CfnOutput(stack, "NeuronArtifactsUri", value=s3_uri(bucket.bucket_name, njob.artifact_prefix(cfg)))
            # `make verify` checks each size's folder and marker under NeuronArtifactsUri (verify/serving.py).
            CfnOutput(
                stack,
                "NeuronCompiledSizes",
                value=",".join(size.key for size in njob.compile_sizes(cfg)),
                description="The image sizes compiled, one folder each under NeuronArtifactsUri",
            )
            CfnOutput(
                stack,
                "NeuronCompileRerunCommand",
                value=njob.rerun_command(cfg),
                description="Re-runs a failed Neuron compile (docs/serving.md)",
            )
        CfnOutput(
            stack, "JobsTopicArn", value=self.jobs.topic.topic_arn, description="Subscribe to hear of finished jobs"
        )
        CfnOutput(stack, "JobsDeadLetterQueueUrl", value=self.jobs.dead_letters.queue_url)

    @property
    def observability(self) -> ImageObservability:
        """Its dashboard rows and alarms, from what `stage` created."""
        return ImageObservability(
            accelerators=self.accelerators,
            price_per_hour={a.name: self.cfg.per_accelerator[a.name].price_per_hour for a in self.accelerators},
            jobs=JobQueues(self.jobs.queue.queue_name, self.jobs.dead_letters.queue_name),
        )

    def dashboard(self, view: DashboardView) -> DashboardSection:
        """See `ImageObservability.dashboard`."""
        return self.observability.dashboard(view)

    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """See `ImageObservability.alarms`."""
        return self.observability.alarms(view, cfg)

    def _grant_jobs(self, stack: Stack, identity: PodIdentityRole) -> None:
        """The pod's job permissions, as a policy of their own beside the role's model-store policy."""
        jobs = self.jobs
        policy = iam.Policy(stack, f"{identity.node.id}Jobs", roles=[identity.role], statements=jobs.pod_statements())
        logical_id = stack.resolve(stack.get_logical_id(jobs.bucket.node.default_child))
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{JOBS_PREFIX}*]",
                reason="Job records and images are scoped to the results bucket's jobs/ prefix; S3 needs the "
                "trailing wildcard to name the objects under it.",
            )
        )

    def _read_weights_and(self, store: s3.IBucket, store_prefixes: list[str]) -> list[iam.PolicyStatement]:
        """Read the weights (wherever they are) and `store_prefixes` of the model store."""
        if self.weights_bucket is store:
            return read_statements(store, [self.weights_key, *store_prefixes])
        return [
            *read_statements(store, store_prefixes),
            *read_statements(self.weights_bucket, [self.weights_key], sid_suffix="Brought"),
        ]

    @staticmethod
    def _acknowledge_reads(
        identity: PodIdentityRole,
        store: s3.IBucket,
        other: s3.IBucket,
        other_prefix: str,
        store_prefixes: list[str],
        *,
        metrics: bool = False,
    ) -> None:
        """Acknowledge the prefix wildcards of `_read_weights_and` / one-bucket reads, by name."""
        if other is store:
            acknowledge_prefix_wildcards(identity, store, [other_prefix, *store_prefixes], metrics=metrics)
            return
        if store_prefixes or metrics:
            acknowledge_prefix_wildcards(identity, store, store_prefixes, metrics=metrics)
        Validations.of(identity).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{other.bucket_name}/{other_prefix}*]",
                reason="Read access to the weights you brought is scoped to their one prefix (servingModelId); "
                "S3 needs the trailing wildcard to name the objects under it.",
            )
        )
