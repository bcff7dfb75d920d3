"""The LLM on the chassis (`Workload`, llmEnabled): what the serving stack adds for the language model.

The stack asks it, stage by stage (cdk/chassis/workload.py), for:

1. `stage`: the model's weights staged from the Hub (the image model's staging, with the transformers layout
   and config.json checked against the llm* settings) and each Deployment's Pod Identity role;
2. `deploy`: the Neuron compile Job and its role (applied once the weights are staged);
3. `service_manifests` before the Ingress: ServiceAccount, Service and PodDisruptionBudget per accelerator (the
   Ingress's target groups need the Services), the capacity Service in `capacity` mode and the NetworkPolicies
   that admit the load balancer and the benchmark's pods to the gateways;
4. `routes` for the Ingress: the OpenAI routes, by cost or over all LLM pods, and its routing controller;
5. `pod_manifests` last: Deployment, ScaledObject and the benchmark's suspended CronJob per accelerator
   (cdk/llm/benchmark_job.py; the `LlmBenchmarkCommand` output runs it);
6. its dashboard section and alarms (cdk/llm/dashboard.py).

Its AWS resources live under the construct `Llm` of the stack (logical ids `Llm...`), its manifests beside the
image service's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from aws_cdk import CfnOutput
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk import versions
from cdk.accelerators import NEURON, Accelerator
from cdk.chassis.workload import DeployContext, ManifestSpec, RoutingControllerSpec, StageContext, Staged, Workload
from cdk.config.llm import LlmConfig
from cdk.config.serving import WEIGHTED_MODES, ServingConfig
from cdk.constructs.image_builds import SmallImage
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.front_door.routes import Routes
from cdk.llm import benchmark_job, router, workload
from cdk.llm import compile_job as lcj
from cdk.llm.dashboard import LlmDashboardInputs
from cdk.llm.images import LLM_GATEWAY_IMAGE, LLM_ROUTER_IMAGE
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.routes import (
    CAPACITY_SERVICE_NAME,
    LLM_ACTION_NAME,
    LLM_PATHS,
    LLM_PREFIX_PATHS,
    LLM_PROMPT_PATHS,
    llm_routing,
)
from cdk.llm.scaling import scaled_object
from cdk.observability.sections import AlarmSection, DashboardSection, DashboardView
from cdk.serving.model_staging import WeightsStaging
from cdk.serving.network_policy import allow_service_port
from cdk.serving.pod_shape import service
from cdk.serving.routing import WEIGHT_TOTAL, CostInput, weights_from_cost
from cdk.serving.service_identity import (
    acknowledge_prefix_wildcards,
    put_metrics_statement,
    read_statements,
    write_statement,
)
from common import metric_names
from common.model_store.layout import weights_prefix

NETWORK_POLICY_NAME: Final = "allow-llm-gateway-from-load-balancer"
VLLM_IMAGES: Final = {"neuron": versions.VLLM_NEURON_IMAGE, "nvidia": versions.VLLM_NVIDIA_IMAGE}
CONSTRUCT_ID: Final = "Llm"  # the scope of its AWS resources in the serving stack: their logical ids start with it

Manifest = dict[str, Any]


def staging_args(llm: LlmConfig) -> list[str]:
    """The staging program's arguments for a language model: its layout, the settings its errors name, and the
    config.json fields the tensor parallel degree was checked against at synth time."""
    return [
        "--layout",
        "transformers",
        "--settings",
        "llm",
        "--expect-config",
        f"num_attention_heads={llm.attention_heads}",
        "--expect-config",
        f"num_key_value_heads={llm.kv_heads}",
    ]


def front_service(llm: LlmConfig) -> Callable[[Accelerator], str]:
    """The Service the load balancer sends a pool's requests to: its router's with `llmRouter` on, else its own."""
    return router.router_name if llm.router else deployment_name


def cost_weights(llm: LlmConfig, accelerators: Sequence[Accelerator]) -> dict[str, int]:
    """LLM Service -> weight out of WEIGHT_TOTAL, proportional to 1 / price per request on each accelerator."""
    per = llm.per_accelerator
    # One unit of work is one request at the benchmark's shape: llmRequestsPerMinute<Acc> of them per minute.
    costs = {
        a.name: CostInput(per[a.name].price_per_hour, 60.0 / per[a.name].requests_per_minute) for a in accelerators
    }
    weights = weights_from_cost(costs, WEIGHT_TOTAL)
    front = front_service(llm)
    return {front(a): weights[a.name] for a in accelerators}


def network_policy(cfg: ServingConfig, load_balancer_cidrs: Sequence[str]) -> Manifest:
    """The LLM pods: TCP to the gateway's port from the load balancer's subnets only (vLLM listens on
    a Unix socket inside the pod; the namespace's default denies the rest)."""
    return allow_service_port(
        cfg, load_balancer_cidrs, name=NETWORK_POLICY_NAME, pods=workload.APP_LABEL, port=GATEWAY_PORT
    )


class LlmServing(Workload):
    """The language model's staging, identities, compile Job, Kubernetes objects, routes, dashboard and alarms."""

    name = "llm"

    def __init__(self, llm: LlmConfig) -> None:
        self.llm = llm

    def kept_up(self) -> Sequence[tuple[str, float]]:
        """Its pods that stay up at rest, at the price of their `llmInstanceType<Acc>` (or `llmPricePerHour<Acc>`)."""
        return [
            (f"{pool.min_replicas} x {name} LLM pod kept up", pool.min_replicas * pool.price_per_hour)
            for name, pool in self.llm.per_accelerator.items()
            if pool.min_replicas
        ]

    def images(self) -> Sequence[SmallImage]:
        """The LLM gateway's image (the gateway, and the pods' model fetch), and the router's with `llmRouter` on."""
        return (LLM_GATEWAY_IMAGE, LLM_ROUTER_IMAGE) if self.llm.router else (LLM_GATEWAY_IMAGE,)

    def neuron_devices_per_pod(self) -> int:
        """The LLM's Neuron pods' devices (its tensor parallel degree's)."""
        return self.llm.neuron_devices

    def stage(self, ctx: StageContext) -> Staged:
        """The weights staged from the Hub and each accelerator's Pod Identity role, under the construct `Llm`."""
        cfg, llm = ctx.cfg, self.llm
        gateway_image = ctx.platform.small_image_uris.get(LLM_GATEWAY_IMAGE.kind)
        if gateway_image is None:
            raise ValueError("llmEnabled needs the LLM gateway image from the platform")
        self.cfg = cfg
        self.construct = Construct(ctx.scope, CONSTRUCT_ID)
        self.accelerators = tuple(ctx.platform.accelerators)
        self.gateway_image = gateway_image
        self.router_image = ctx.platform.small_image_uris.get(LLM_ROUTER_IMAGE.kind) if llm.router else None
        if llm.router and self.router_image is None:
            raise ValueError("llmRouter needs the LLM router image from the platform")
        self.bucket = ctx.store.bucket
        self.region = ctx.scope.region
        self.weights_prefix = weights_prefix(llm.model_id)
        self.staging = WeightsStaging(
            self.construct,
            "WeightsStaging",
            bucket=self.bucket,
            model_id=llm.model_id,
            revision=llm.model_revision,
            token_secret=cfg.hub_token_secret,
            program_args=staging_args(llm),
        )
        self.neuron = NEURON in self.accelerators
        self.artifacts_prefix = lcj.artifact_prefix(llm) if self.neuron else None
        self.identities = {acc.name: self._pod_identity(ctx.platform.cluster, acc) for acc in self.accelerators}
        self.weights = cost_weights(llm, self.accelerators) if cfg.routing_mode in WEIGHTED_MODES else None
        return Staged(writers=[self.staging.resource])

    def deploy(self, ctx: DeployContext) -> None:
        """The Neuron compile Job (with Neuron enabled), after the weights and the NetworkPolicies; the outputs that
        run the compile again and the benchmark."""
        cfg, llm = ctx.cfg, self.llm
        self.env_config_maps = ctx.env_config_maps
        self.compile_job: eks.KubernetesManifest | None = None
        if self.neuron:
            job = lcj.compile_job(
                llm,
                cfg,
                gateway_image=self.gateway_image,
                bucket=self.bucket.bucket_name,
                weights_prefix=self.weights_prefix,
                region=self.region,
            )
            role = self._compile_identity(ctx.platform.cluster)
            self.compile_job = ctx.manifest(
                "LlmNeuronCompileJob",
                [job.service_account(), job.job(), job.rerun_cronjob()],
                role.association,
                self.staging.resource,
                ctx.network_policies,
            )
            CfnOutput(
                ctx.scope,
                "LlmNeuronCompileRerunCommand",
                value=job.rerun_command(),
                description="Re-runs a failed LLM compile (docs/llm-serving.md)",
            )
        stack = ctx.scope
        CfnOutput(
            stack,
            "LlmBenchmarkCommand",
            value=f'make bench-llm-cluster BENCH_ARGS="--stack {stack.stack_name} --region {self.region} '
            f'--namespace {cfg.namespace}"',
            description="Benchmarks one LLM replica per accelerator (docs/llm-serving.md); run it in this repository",
        )

    def service_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """What the Ingress refers to and the pods need at creation, per accelerator, plus the NetworkPolicies."""
        # With the router on, the load balancer reaches the routers and they the gateways.
        policies = (
            router.network_policies(self.cfg, ctx.load_balancer_cidrs)
            if self.llm.router
            else [network_policy(self.cfg, ctx.load_balancer_cidrs)]
        )
        objects: list[Manifest] = [*policies, benchmark_job.allow_from_benchmark(self.cfg)]
        for acc in self.accelerators:
            account, svc, budget, _ = self._manifests(acc)
            objects += [account, svc, budget]
            if self.llm.router:
                objects += router.service_manifests(acc, self.cfg)
        if self.weights is None:
            front = router.ROUTER_LABEL if self.llm.router else workload.APP_LABEL
            objects.append(service(CAPACITY_SERVICE_NAME, dict(front), self.cfg, labels=front))
        return [ManifestSpec("LlmServices", objects)]

    def routes(self, ctx: StageContext) -> Routes:
        """The OpenAI routes: Exact paths (and the retrieve-model prefix) to the `llm-weighted` action (cost modes) or
        the `llm` Service."""
        return Routes(
            paths=LLM_PATHS,
            path_type="Exact",
            action=LLM_ACTION_NAME,
            weights=self.weights,
            capacity_service=CAPACITY_SERVICE_NAME,
            prompt_paths=LLM_PROMPT_PATHS,
            prefix_paths=LLM_PREFIX_PATHS,
        )

    def routing_controller(self, ctx: StageContext) -> RoutingControllerSpec | None:
        """`llm-routing-controller` over the LLM Services, in the weighted modes."""
        if self.weights is None:
            return None
        return RoutingControllerSpec(
            construct_prefix="Llm",
            routed=llm_routing(self.accelerators, self.weights, front_service(self.llm)),
            description="LLM routing controller: publish the RoutingWeight metric",
        )

    def pod_manifests(self, ctx: DeployContext) -> Sequence[ManifestSpec]:
        """Per accelerator: the Deployment, its ScaledObject and the benchmark's CronJob."""
        return [
            ManifestSpec(f"Llm{acc.name.capitalize()}Workload", self.pod_objects(acc), self.pod_dependencies(acc))
            for acc in self.accelerators
        ]

    def outputs(self, ctx: StageContext, public_url: str) -> None:
        """The OpenAI base URL."""
        CfnOutput(
            ctx.scope,
            "LlmBaseUrl",
            value=f"{public_url}/v1",
            description=f"OpenAI base URL of model {self.llm.served_model_name} (sign-in required)",
        )

    def dashboard(self, view: DashboardView) -> DashboardSection:
        """See `LlmDashboardInputs.dashboard`."""
        return self.observability(view).dashboard(view)

    def alarms(self, view: DashboardView, cfg: ServingConfig) -> AlarmSection:
        """See `LlmDashboardInputs.alarms`."""
        return self.observability(view).alarms(view, cfg)

    def observability(self, view: DashboardView) -> LlmDashboardInputs:
        """Its dashboard section and alarms."""
        return LlmDashboardInputs.from_config(self.llm, namespace=view.namespace)

    def pod_objects(self, acc: Accelerator) -> list[Manifest]:
        """The Deployment, its ScaledObject and the benchmark's CronJob on `acc`; its router's with `llmRouter` on."""
        *_, deployment = self._manifests(acc)
        bench = benchmark_job.cronjob(acc, self.llm, self.cfg, image=self.gateway_image, signed_in=self.signed_in)
        objects = [deployment, scaled_object(acc, self.llm, self.cfg, self.region), bench]
        if self.llm.router and self.router_image is not None:
            objects.append(router.deployment(acc, self.llm.router, self.cfg, image=self.router_image))
        return objects

    def pod_dependencies(self, acc: Accelerator) -> list[Construct]:
        """What `acc`'s pods need first: their role, the staged weights, and on Neuron the compile Job."""
        deps: list[Construct] = [self.identities[acc.name].association, self.staging.resource]
        if acc.name == "neuron" and self.compile_job is not None:
            deps.append(self.compile_job)
        return deps

    def _manifests(self, acc: Accelerator) -> list[Manifest]:
        return workload.manifests(
            acc,
            self.llm,
            self.cfg,
            gateway_image=self.gateway_image,
            vllm_image=VLLM_IMAGES[acc.name],
            bucket=self.bucket.bucket_name,
            weights_prefix=self.weights_prefix,
            artifacts_prefix=self.artifacts_prefix if acc.name == "neuron" else None,
            region=self.region,
            env_config_maps=self.env_config_maps,
        )

    @property
    def signed_in(self) -> bool:
        """Whether callers sign in (Cognito): the gateways then check tokens, and the benchmark sends one."""
        return self.cfg.front_door.auth == "cognito"

    def _pod_identity(self, cluster: eks.ICluster, acc: Accelerator) -> PodIdentityRole:
        """Read the weights (and on Neuron the compiled artifacts), publish the gateway's metrics."""
        prefixes = [
            self.weights_prefix,
            *([self.artifacts_prefix] if acc.name == "neuron" and self.artifacts_prefix else []),
        ]
        identity = PodIdentityRole(
            self.construct,
            f"{acc.name.capitalize()}Identity",
            cluster=cluster,
            namespace=self.cfg.namespace,
            service_account=workload.service_account_name(acc),
            statements=[*read_statements(self.bucket, prefixes), put_metrics_statement(metric_names.NAMESPACE)],
            description=f"{deployment_name(acc)}: read the language model's prefixes, publish the gateway's metrics",
        )
        acknowledge_prefix_wildcards(identity, self.bucket, prefixes, metrics=True)
        return identity

    def _compile_identity(self, cluster: eks.ICluster) -> PodIdentityRole:
        """Read the weights and the artifacts prefix (the publish step looks for its marker), write the artifacts."""
        if self.artifacts_prefix is None:
            raise ValueError("the LLM compile Job runs only with Neuron enabled")
        prefixes = [self.weights_prefix, self.artifacts_prefix]
        identity = PodIdentityRole(
            self.construct,
            "NeuronCompileIdentity",
            cluster=cluster,
            namespace=self.cfg.namespace,
            service_account=lcj.COMPILE_NAME,
            statements=[*read_statements(self.bucket, prefixes), write_statement(self.bucket, self.artifacts_prefix)],
            description="LLM compile job: read the language model's weights, write its compiled artifacts",
        )
        acknowledge_prefix_wildcards(identity, self.bucket, prefixes)
        return identity
