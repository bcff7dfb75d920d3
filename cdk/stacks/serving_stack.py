"""The serving stack: model store, Neuron compile job, per-accelerator workloads, ALB, KEDA, dashboard.

    ServingStack(app, "SdServing", config=ServingConfig.from_context(...), platform=platform_handle, env=...)

The ALB is created by the AWS Load Balancer Controller at run time from the Ingress, so its DNS
name is read back from the Ingress status with a kubectl-backed `KubernetesObjectValue`, and its
CloudWatch dimension (`app/<name>/<id>`) with one DescribeLoadBalancers call by its configured name.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, CfnResource, Duration, Fn, Stack, Validations
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from app import metric_names
from app.model_store_layout import s3_uri, weights_prefix
from cdk.accelerators import Accelerator
from cdk.config.serving import ServingConfig
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.observability.alarms import ServingAlarms
from cdk.observability.dashboard import DashboardInputs, JobQueues, ServingDashboard
from cdk.platform_handle import PlatformHandle
from cdk.serving import ingress as ing
from cdk.serving import neuron_compile_job as njob
from cdk.serving import scaling, workloads
from cdk.serving.jobs import JOBS_PREFIX, JobsInfra
from cdk.serving.model_store import ModelStore
from cdk.serving.routing import CostInput, resolve_weights
from cdk.serving.service_identity import put_metrics_statement, read_statements, write_statement


def model_prefix_for(acc: Accelerator, cfg: ServingConfig) -> str:
    """Neuron pods load the compiled artifacts; GPU pods load the weights."""
    return njob.artifact_prefix(cfg) if acc.name == "neuron" else weights_prefix(cfg.model_id)


def routing_weights(cfg: ServingConfig, accelerators: tuple[Accelerator, ...]) -> dict[str, int] | None:
    """Service name -> weight in cost mode; None in capacity mode."""
    if cfg.routing_mode != "cost":
        return None
    per = cfg.per_accelerator
    # Async-only accelerators take jobs from the queue, never requests from the ALB.
    accelerators = tuple(a for a in accelerators if not per[a.name].async_only)
    weights = resolve_weights(
        accelerators,
        {a.name: per[a.name].routing_weight for a in accelerators},
        {a.name: CostInput(per[a.name].price_per_hour, per[a.name].seconds_per_image) for a in accelerators},
    )
    return {a.deployment_name: weights[a.name] for a in accelerators}


class ServingStack(Stack):
    """Everything that serves Stable Diffusion on the platform's cluster."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ServingConfig,
        platform: PlatformHandle,
        **stack_kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **stack_kwargs)
        if not platform.accelerators:
            raise ValueError("the platform enables no accelerator: nothing to serve on")
        cfg = config
        cluster = platform.cluster
        self.store = store = ModelStore(self, "ModelStore", retain=cfg.model_store_retain)
        bucket = store.bucket
        region = self.region
        self.weights = routing_weights(cfg, platform.accelerators)
        self.jobs = jobs = JobsInfra(
            self, "Jobs", config=cfg.jobs, log_bucket=store.log_bucket, retain=cfg.model_store_retain
        )
        if platform.keda_operator_role is not None:
            iam.Policy(
                self, "KedaReadsJobQueue", roles=[platform.keda_operator_role], statements=[jobs.scaler_statement()]
            )

        ns = eks.KubernetesManifest(self, "Namespace", cluster=cluster, manifest=[workloads.namespace(cfg)])

        def manifest(cid: str, objects: list[dict[str, Any]], *deps: Construct) -> eks.KubernetesManifest:
            m = eks.KubernetesManifest(self, cid, cluster=cluster, manifest=objects)
            m.node.add_dependency(ns, *deps)
            return m

        compile_job: eks.KubernetesManifest | None = None
        neuron = next((a for a in platform.accelerators if a.name == "neuron"), None)
        if neuron is not None:
            image = platform.image_uris[neuron.name]
            compile_role = PodIdentityRole(
                self,
                "NeuronCompileIdentity",
                cluster=cluster,
                namespace=cfg.namespace,
                service_account=njob.SERVICE_ACCOUNT,
                statements=[
                    *read_statements(bucket, [weights_prefix(cfg.model_id), njob.artifact_prefix(cfg)]),
                    write_statement(bucket, njob.artifact_prefix(cfg)),
                ],
                description="Neuron compile job: read the model's weights, write its compiled artifacts",
            )
            self._acknowledge_prefix_wildcards(
                compile_role, bucket, [weights_prefix(cfg.model_id), njob.artifact_prefix(cfg)]
            )
            compile_job = manifest(
                "NeuronCompileJob",
                [
                    njob.compile_service_account(cfg),
                    njob.compile_job(cfg, image=image, bucket=bucket.bucket_name, region=region),
                ],
                compile_role.association,
            )

        self.identities: dict[str, PodIdentityRole] = {}
        workload_manifests = []
        for acc in platform.accelerators:
            prefix = model_prefix_for(acc, cfg)
            identity = PodIdentityRole(
                self,
                f"{acc.name.capitalize()}Identity",
                cluster=cluster,
                namespace=cfg.namespace,
                service_account=workloads.service_account_name(acc),
                statements=[*read_statements(bucket, [prefix]), put_metrics_statement(metric_names.NAMESPACE)],
                description=f"{acc.deployment_name}: read {prefix} of the model store, publish service metrics",
            )
            self._acknowledge_prefix_wildcards(identity, bucket, [prefix], metrics=True)
            self._grant_jobs(identity, jobs)
            self.identities[acc.name] = identity
            image = platform.image_uris[acc.name]
            init = (
                [njob.wait_init_container(cfg, image=image, bucket=bucket.bucket_name, region=region)]
                if acc.name == "neuron"
                else []
            )
            objects = [
                workloads.service_account(acc, cfg),
                workloads.deployment(
                    acc,
                    cfg,
                    image=image,
                    model_uri=s3_uri(bucket.bucket_name, prefix),
                    region=region,
                    init_containers=init,
                    extra_env=jobs.service_env(),
                ),
                workloads.accelerator_service(acc, cfg),
                workloads.pod_disruption_budget(acc, cfg),
                scaling.scaled_object(acc, cfg, region, jobs.queue.queue_url),
            ]
            workload_manifests.append(manifest(f"{acc.name.capitalize()}Workload", objects, identity.association))

        shared = [scaling.trigger_authentication(cfg)]
        if self.weights is None:
            shared.append(workloads.capacity_service(cfg))
        shared.append(
            ing.ingress(
                cfg,
                weights=self.weights,
                access_log_bucket=store.log_bucket.bucket_name if cfg.access_logs else None,
            )
        )
        front = manifest("Ingress", shared, *workload_manifests)

        hostname = eks.KubernetesObjectValue(
            self,
            "AlbHostname",
            cluster=cluster,
            object_type="ingress",
            object_name=ing.INGRESS_NAME,
            object_namespace=cfg.namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            timeout=Duration.minutes(15),
        )
        hostname.node.add_dependency(front)
        scheme = "https" if cfg.certificate_arn else "http"
        self.url_output = CfnOutput(
            self, "ServiceUrl", value=f"{scheme}://{hostname.value}/", description="The Gradio UI and /v1/generate"
        )

        load_balancer = self._load_balancer_dimension(cfg, hostname)
        inputs = DashboardInputs(
            accelerators=platform.accelerators,
            cluster_name=cluster.cluster_name,
            namespace=cfg.namespace,
            load_balancer=load_balancer,
            price_per_hour={a.name: cfg.per_accelerator[a.name].price_per_hour for a in platform.accelerators},
            jobs=JobQueues(jobs.queue.queue_name, jobs.dead_letters.queue_name),
        )
        self.dashboard = ServingDashboard(self, "Dashboard", inputs=inputs, name=f"{construct_id}-serving")
        self.alarms = ServingAlarms(self, "Alarms", inputs=inputs, config=cfg)
        CfnOutput(self, "ModelStoreBucket", value=bucket.bucket_name, description="Stage weights under models/<slug>/")
        CfnOutput(self, "ModelWeightsUri", value=s3_uri(bucket.bucket_name, weights_prefix(cfg.model_id)))
        if compile_job is not None:
            CfnOutput(self, "NeuronArtifactsUri", value=s3_uri(bucket.bucket_name, njob.artifact_prefix(cfg)))
        CfnOutput(self, "JobsTopicArn", value=jobs.topic.topic_arn, description="Subscribe to hear of finished jobs")
        CfnOutput(self, "JobsDeadLetterQueueUrl", value=jobs.dead_letters.queue_url)

    def _grant_jobs(self, identity: PodIdentityRole, jobs: JobsInfra) -> None:
        """The pod's job permissions, as a policy of their own beside the role's model-store policy."""
        policy = iam.Policy(self, f"{identity.node.id}Jobs", roles=[identity.role], statements=jobs.pod_statements())
        logical_id = self.resolve(self.get_logical_id(jobs.bucket.node.default_child))
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{JOBS_PREFIX}*]",
                reason="Job records and images are scoped to the results bucket's jobs/ prefix; S3 needs the "
                "trailing wildcard to name the objects under it.",
            )
        )

    def _load_balancer_dimension(self, cfg: ServingConfig, hostname: eks.KubernetesObjectValue) -> str:
        """`app/<name>/<id>` of the ALB the controller created, looked up once it exists."""
        lookup = cr.AwsCustomResource(
            self,
            "AlbLookup",
            on_update=cr.AwsSdkCall(
                service="ElasticLoadBalancingV2",
                action="describeLoadBalancers",
                parameters={"Names": [cfg.load_balancer_name]},
                # Re-read when the ALB is replaced (new hostname).
                physical_resource_id=cr.PhysicalResourceId.of(hostname.value),
                output_paths=["LoadBalancers.0.LoadBalancerArn"],
            ),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["elasticloadbalancing:DescribeLoadBalancers"], resources=["*"])]
            ),
            install_latest_aws_sdk=False,
        )
        Validations.of(lookup).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="elasticloadbalancing:DescribeLoadBalancers does not support resource-level permissions.",
            )
        )
        # The provider function is a stack-level singleton, so it is acknowledged where it lives.
        provider = self.node.try_find_child("AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", ""))
        if provider is not None:
            Validations.of(provider).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaBasicExecutionRole]",
                    reason="The CDK-provided lookup function only writes its own logs; the managed policy "
                    "grants exactly that.",
                )
            )
            function = provider.node.default_child
            if isinstance(function, CfnResource):
                # CDK's singleton adds a DependsOn on its role that the Role reference already implies.
                function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
        arn = lookup.get_response_field("LoadBalancers.0.LoadBalancerArn")
        return Fn.select(1, Fn.split("loadbalancer/", arn))

    def _acknowledge_prefix_wildcards(
        self, identity: PodIdentityRole, bucket: s3.IBucket, prefixes: list[str], *, metrics: bool = False
    ) -> None:
        """Acknowledge the IAM5 findings that are the design: `<prefix>*` objects and namespaced metrics.

        cdk-nag reports one finding per wildcard resource, so each prefix is acknowledged by name:
        any other wildcard added to these roles later still fails the check.
        """
        logical_id = self.resolve(self.get_logical_id(bucket.node.default_child))
        acks = [
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{prefix}*]",
                reason="Object access is scoped to one model-store prefix; S3 needs the trailing wildcard "
                "to name the objects under it.",
            )
            for prefix in prefixes
        ]
        if metrics:
            acks.append(
                Acknowledgment(
                    id="AwsSolutions-IAM5[Resource::*]",
                    reason="cloudwatch:PutMetricData has no resource-level scoping; it is limited by the "
                    "cloudwatch:namespace condition to the service's own namespace.",
                )
            )
        Validations.of(identity).acknowledge(*acks)
