"""LLM serving in the serving stack (llmEnabled): what the stack adds for the language model, in the stack's order.

The stack creates one `LlmServing` and asks it, step by step, for what belongs at each of its own stages:

1. at once: the model's weights staged from the Hub (the image model's staging, with the transformers layout
   and config.json checked against the llm* settings), each Deployment's and the compile Job's Pod Identity
   role, and the Neuron compile Job (applied once the weights are staged);
2. `service_objects` before the Ingress: ServiceAccount, Service and PodDisruptionBudget per accelerator (the
   Ingress's target groups need the Services), the capacity Service in `capacity` mode and the NetworkPolicies
   that admit the load balancer and the benchmark's pods to the gateways;
3. `routes` for the Ingress: the OpenAI routes, by cost or over all LLM pods;
4. `pod_objects` last, with the image service's pods: Deployment, ScaledObject and the benchmark's suspended
   CronJob per accelerator (cdk/llm/benchmark_job.py; the `LlmBenchmarkCommand` output runs it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk import versions
from cdk.accelerators import NEURON, Accelerator
from cdk.config.llm import LlmConfig
from cdk.config.serving import WEIGHTED_MODES, ServingConfig
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.llm import benchmark_job, workload
from cdk.llm import compile_job as lcj
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.scaling import scaled_object
from cdk.serving.ingress import LlmRoutes
from cdk.serving.model_staging import WeightsStaging
from cdk.serving.network_policy import allow_service_port
from cdk.serving.routing import WEIGHT_TOTAL, CostInput, weights_from_cost
from cdk.serving.service_identity import (
    acknowledge_prefix_wildcards,
    put_metrics_statement,
    read_statements,
    write_statement,
)
from cdk.serving.workloads import service
from common import metric_names
from common.model_store.layout import weights_prefix

CAPACITY_SERVICE_NAME = "llm"  # capacity mode: one Service over every LLM pod
NETWORK_POLICY_NAME = "allow-llm-gateway-from-load-balancer"
VLLM_IMAGES = {"neuron": versions.VLLM_NEURON_IMAGE, "nvidia": versions.VLLM_NVIDIA_IMAGE}

Manifest = dict[str, Any]
ManifestFactory = Callable[..., eks.KubernetesManifest]


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


def cost_weights(llm: LlmConfig, accelerators: Sequence[Accelerator]) -> dict[str, int]:
    """LLM Service -> weight out of WEIGHT_TOTAL, proportional to 1 / price per request on each accelerator."""
    per = llm.per_accelerator
    # One unit of work is one request at the benchmark's shape: llmRequestsPerMinute<Acc> of them per minute.
    costs = {
        a.name: CostInput(per[a.name].price_per_hour, 60.0 / per[a.name].requests_per_minute) for a in accelerators
    }
    weights = weights_from_cost(costs, WEIGHT_TOTAL)
    return {deployment_name(a): weights[a.name] for a in accelerators}


def network_policy(cfg: ServingConfig, load_balancer_cidrs: Sequence[str]) -> Manifest:
    """The LLM pods: TCP to the gateway's port from the load balancer's subnets only (vLLM's port is the
    pod's loopback; the namespace's default denies the rest)."""
    return allow_service_port(
        cfg, load_balancer_cidrs, name=NETWORK_POLICY_NAME, pods=workload.APP_LABEL, port=GATEWAY_PORT
    )


class LlmServing(Construct):
    """The language model's staging, identities, compile Job, Kubernetes objects and routes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: ServingConfig,
        llm: LlmConfig,
        cluster: eks.ICluster,
        accelerators: Sequence[Accelerator],
        gateway_image: str,
        bucket: s3.IBucket,
        manifest: ManifestFactory,
        before_pods: Sequence[Construct],
    ) -> None:
        """`manifest(cid, objects, *deps)`: the stack's way to apply objects in its namespace.
        `before_pods`: what the Neuron compile Job waits for besides the weights (the NetworkPolicies)."""
        super().__init__(scope, construct_id)
        self.cfg, self.llm = cfg, llm
        self.accelerators = tuple(accelerators)
        self.gateway_image = gateway_image
        self.bucket = bucket
        self.region = Stack.of(self).region
        self.weights_prefix = weights_prefix(llm.model_id)
        self.staging = WeightsStaging(
            self,
            "WeightsStaging",
            bucket=bucket,
            model_id=llm.model_id,
            revision=llm.model_revision,
            token_secret=cfg.hub_token_secret,
            program_args=staging_args(llm),
        )
        self.neuron = NEURON in self.accelerators
        self.artifacts_prefix = lcj.artifact_prefix(llm) if self.neuron else None
        self.identities = {acc.name: self._pod_identity(cluster, acc) for acc in self.accelerators}
        self.compile_job: eks.KubernetesManifest | None = None
        if self.neuron:
            job = lcj.compile_job(
                llm,
                cfg,
                gateway_image=gateway_image,
                bucket=bucket.bucket_name,
                weights_prefix=self.weights_prefix,
                region=self.region,
            )
            role = self._compile_identity(cluster)
            self.compile_job = manifest(
                "LlmNeuronCompileJob",
                [job.service_account(), job.job(), job.rerun_cronjob()],
                role.association,
                self.staging.resource,
                *before_pods,
            )
            CfnOutput(
                Stack.of(self),
                "LlmNeuronCompileRerunCommand",
                value=job.rerun_command(),
                description="Re-runs a failed LLM compile (docs/llm-serving.md)",
            )
        self.weights = cost_weights(llm, self.accelerators) if cfg.routing_mode in WEIGHTED_MODES else None
        stack = Stack.of(self)
        CfnOutput(
            stack,
            "LlmBenchmarkCommand",
            value=f'make bench-llm-cluster BENCH_ARGS="--stack {stack.stack_name} --region {self.region} '
            f'--namespace {cfg.namespace}"',
            description="Benchmarks one LLM replica per accelerator (docs/llm-serving.md); run it in this repository",
        )

    @property
    def routes(self) -> LlmRoutes:
        """The OpenAI routes of the Ingress."""
        if self.weights is not None:
            return LlmRoutes(self.weights)
        return LlmRoutes(None, capacity_service=CAPACITY_SERVICE_NAME)

    def service_objects(self, load_balancer_cidrs: Sequence[str]) -> list[Manifest]:
        """What the Ingress refers to and the pods need at creation, per accelerator, plus the NetworkPolicy."""
        objects: list[Manifest] = [
            network_policy(self.cfg, load_balancer_cidrs),
            benchmark_job.allow_from_benchmark(self.cfg),
        ]
        for acc in self.accelerators:
            account, svc, budget, _ = self._manifests(acc)
            objects += [account, svc, budget]
        if self.weights is None:
            objects.append(
                service(CAPACITY_SERVICE_NAME, dict(workload.APP_LABEL), self.cfg, labels=workload.APP_LABEL)
            )
        return objects

    def pod_objects(self, acc: Accelerator) -> list[Manifest]:
        """The Deployment, its ScaledObject and the benchmark's CronJob on `acc`."""
        *_, deployment = self._manifests(acc)
        bench = benchmark_job.cronjob(acc, self.llm, self.cfg, image=self.gateway_image, signed_in=self.signed_in)
        return [deployment, scaled_object(acc, self.llm, self.cfg, self.region), bench]

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
            env_config_maps=self._config_maps,
        )

    @property
    def signed_in(self) -> bool:
        """Whether callers sign in (Cognito): the gateways then check tokens, and the benchmark sends one."""
        return self.cfg.front_door.auth == "cognito"

    @property
    def _config_maps(self) -> tuple[str, ...]:
        from cdk.serving.sign_in import CONFIG_MAP_NAME

        return (CONFIG_MAP_NAME,) if self.signed_in else ()

    def _pod_identity(self, cluster: eks.ICluster, acc: Accelerator) -> PodIdentityRole:
        """Read the weights (and on Neuron the compiled artifacts), publish the gateway's metrics."""
        prefixes = [
            self.weights_prefix,
            *([self.artifacts_prefix] if acc.name == "neuron" and self.artifacts_prefix else []),
        ]
        identity = PodIdentityRole(
            self,
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
            self,
            "NeuronCompileIdentity",
            cluster=cluster,
            namespace=self.cfg.namespace,
            service_account=lcj.COMPILE_NAME,
            statements=[*read_statements(self.bucket, prefixes), write_statement(self.bucket, self.artifacts_prefix)],
            description="LLM compile job: read the language model's weights, write its compiled artifacts",
        )
        acknowledge_prefix_wildcards(identity, self.bucket, prefixes)
        return identity
