"""The serving stack: model store, Neuron compile job, per-accelerator workloads, ALB, KEDA, dashboard.

    ServingStack(app, "SdOnEksServing", config=config.serving, platform=platform_handle, env=env)

The ALB is created by the AWS Load Balancer Controller at run time from the Ingress, so its DNS
name is read back from the Ingress status with a kubectl-backed `KubernetesObjectValue`, and its
CloudWatch dimension (`app/<name>/<id>`) with one DescribeLoadBalancers call by its configured name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Fn, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import deploy_limits
from cdk.accelerators import Accelerator
from cdk.config.context import ConfigError
from cdk.config.llm import LlmConfig
from cdk.config.serving import WEIGHTED_MODES, ServingConfig
from cdk.constructs.empty_on_create_rollback import EmptyOnCreateRollback
from cdk.constructs.network import LOAD_BALANCER_SUBNET_GROUP, PUBLIC_SUBNET_GROUP
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.llm.serving import LlmServing
from cdk.nag import acknowledge_aws_custom_resource_provider
from cdk.observability.alarms import ServingAlarms
from cdk.observability.dashboard import DashboardInputs, JobQueues, ServingDashboard
from cdk.observability.llm_dashboard import LlmDashboardInputs
from cdk.platform_handle import PlatformHandle
from cdk.serving import ingress as ing
from cdk.serving import network_policy, scaling, workloads
from cdk.serving import neuron_compile_job as njob
from cdk.serving import routing_controller_workload as rcw
from cdk.serving.edge import EdgeDistribution
from cdk.serving.jobs import JOBS_PREFIX, JobsInfra
from cdk.serving.model_staging import WeightsStaging
from cdk.serving.model_store import ModelStore
from cdk.serving.routing import WEIGHT_TOTAL, CostInput, resolve_weights
from cdk.serving.service_identity import (
    acknowledge_prefix_wildcards,
    put_metrics_statement,
    read_statements,
    write_statement,
)
from cdk.serving.sign_in import CONFIG_MAP_NAME, RESOURCE_SERVER_ID, SignIn
from cdk.serving.waf import ServingWebAcl
from common import metric_names
from common.model_store.layout import is_s3_uri, s3_uri, weights_location
from routing_controller.decision import normalize


def routing_weights(cfg: ServingConfig, accelerators: tuple[Accelerator, ...]) -> dict[str, int] | None:
    """Service name -> weight in the weighted modes (the cost weights); None in capacity mode."""
    if cfg.routing_mode not in WEIGHTED_MODES:
        return None
    per = cfg.per_accelerator
    # Async-only accelerators take jobs from the queue, never requests from the ALB.
    accelerators = tuple(a for a in accelerators if not per[a.name].async_only)
    weights = resolve_weights(
        accelerators,
        {a.name: per[a.name].routing_weight for a in accelerators},
        {a.name: CostInput(per[a.name].price_per_hour, per[a.name].seconds_per_image) for a in accelerators},
    )
    if cfg.runs_routing_controller:
        # The controller's weights sum to WEIGHT_TOTAL; explicit weights are scaled to the same total
        # so that the deployed Ingress already carries what the controller sets while all is healthy.
        weights = normalize({name: float(w) for name, w in weights.items()}, WEIGHT_TOTAL)
    return {a.deployment_name: weights[a.name] for a in accelerators}


def load_balancer_subnets(cfg: ServingConfig, vpc: ec2.IVpc) -> ec2.SelectedSubnets:
    """The subnets the ALB is placed in: `ingressSubnetGroup`, else the app's own VPC's group for its scheme."""
    door = cfg.front_door
    group = door.subnet_group or (PUBLIC_SUBNET_GROUP if door.internet_facing else LOAD_BALANCER_SUBNET_GROUP)
    try:
        selected = vpc.select_subnets(subnet_group_name=group)
    except RuntimeError as exc:  # the CDK's validation error, which lists the groups the VPC has
        raise ConfigError(
            f"setting 'ingressSubnetGroup' = {group!r} names no subnet group of the VPC ({exc}): name the group "
            "whose subnets hold only load balancers (the serving pods admit traffic from them alone)"
        ) from None
    if not selected.subnets:
        raise ConfigError(f"setting 'ingressSubnetGroup' = {group!r} has no subnets")
    return selected


class ServingStack(Stack):
    """Everything that serves Stable Diffusion on the platform's cluster."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ServingConfig,
        platform: PlatformHandle,
        llm: LlmConfig | None = None,
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
        # The weights: staged from the Hub by the deploy itself, or brought (s3:// id or servingStageWeights=false).
        weights_bucket_name, weights_key = weights_location(cfg.model_id, bucket.bucket_name)
        weights_bucket = (
            s3.Bucket.from_bucket_name(self, "BroughtWeights", weights_bucket_name)
            if is_s3_uri(cfg.model_id)
            else bucket
        )
        self.staging = (
            WeightsStaging(
                self,
                "WeightsStaging",
                bucket=bucket,
                model_id=cfg.model_id,
                revision=cfg.model_revision,
                token_secret=cfg.hub_token_secret,
            )
            if cfg.stages_weights
            else None
        )
        after_weights: list[Construct] = [self.staging.resource] if self.staging is not None else []
        self.jobs = jobs = JobsInfra(
            self, "Jobs", config=cfg.jobs, log_bucket=store.log_bucket, retain=cfg.model_store_retain
        )
        # Deleted after the writers that depend on it (staging, the namespace and its pods), before the buckets.
        emptier = EmptyOnCreateRollback(
            self, "EmptyOnCreateRollback", buckets=[bucket, store.log_bucket, jobs.bucket]
        ).resource
        if self.staging is not None:
            self.staging.resource.node.add_dependency(emptier)
        if platform.keda_operator_role is not None:
            iam.Policy(
                self, "KedaReadsJobQueue", roles=[platform.keda_operator_role], statements=[jobs.scaler_statement()]
            )

        ns = eks.KubernetesManifest(self, "Namespace", cluster=cluster, manifest=[workloads.namespace(cfg)])
        ns.node.add_dependency(emptier)

        def manifest(cid: str, objects: list[dict[str, Any]], *deps: Construct) -> eks.KubernetesManifest:
            m = eks.KubernetesManifest(self, cid, cluster=cluster, manifest=objects)
            m.node.add_dependency(ns, *deps)
            return m

        # Inbound traffic is denied before any pod of the namespace starts; only the ALB's subnets reach the pods.
        lb_subnets = load_balancer_subnets(cfg, platform.vpc)
        policies = manifest(
            "NetworkPolicies",
            [
                network_policy.default_deny_ingress(cfg),
                network_policy.allow_service_port(cfg, [s.ipv4_cidr_block for s in lb_subnets.subnets]),
            ],
        )

        # LLM serving (llmEnabled): its staging, identities and compile Job now, its objects at the stages below.
        self.llm: LlmServing | None = None
        if llm is not None:
            if platform.llm_gateway_image is None:
                raise ValueError("llmEnabled needs the LLM gateway image from the platform")
            self.llm = LlmServing(
                self,
                "Llm",
                cfg=cfg,
                llm=llm,
                cluster=cluster,
                accelerators=platform.accelerators,
                gateway_image=platform.llm_gateway_image,
                bucket=bucket,
                manifest=manifest,
                before_pods=[policies],
            )
            self.llm.staging.resource.node.add_dependency(emptier)

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
                    *self._read_weights_and(bucket, weights_bucket, weights_key, [njob.artifact_prefix(cfg)]),
                    write_statement(bucket, njob.artifact_prefix(cfg)),
                ],
                description="Neuron compile job: read the model's weights, write its compiled artifacts",
            )
            self._acknowledge_reads(compile_role, bucket, weights_bucket, weights_key, [njob.artifact_prefix(cfg)])
            compile_args = {"image": image, "bucket": bucket.bucket_name, "region": region}
            compile_job = manifest(
                "NeuronCompileJob",
                [
                    njob.compile_service_account(cfg),
                    njob.compile_job(cfg, **compile_args),
                    njob.rerun_cronjob(cfg, **compile_args),
                ],
                compile_role.association,
                policies,
                *after_weights,
            )

        # Sign-in: the pods read its settings from a ConfigMap written once the public URL is known.
        self.sign_in = SignIn(self, "SignIn", cfg=cfg) if cfg.front_door.auth == "cognito" else None
        auth_config_maps = (CONFIG_MAP_NAME,) if self.sign_in is not None else ()
        self.identities: dict[str, PodIdentityRole] = {}
        # Per accelerator: what the Ingress and the pods refer to (ServiceAccount, Service, PDB) first; the
        # Deployment and its ScaledObject last, once everything its pods need at creation exists.
        service_manifests: list[eks.KubernetesManifest] = []
        pod_objects: list[tuple[str, list[dict[str, Any]], list[Construct]]] = []
        for acc in platform.accelerators:
            # Neuron pods load the compiled artifacts from the store; GPU pods the weights, wherever they are.
            model_bucket, prefix = (
                (bucket, njob.artifact_prefix(cfg)) if acc.name == "neuron" else (weights_bucket, weights_key)
            )
            identity = PodIdentityRole(
                self,
                f"{acc.name.capitalize()}Identity",
                cluster=cluster,
                namespace=cfg.namespace,
                service_account=workloads.service_account_name(acc),
                statements=[*read_statements(model_bucket, [prefix]), put_metrics_statement(metric_names.NAMESPACE)],
                description=f"{acc.deployment_name}: read {prefix} of the model store, publish service metrics",
            )
            self._acknowledge_reads(identity, bucket, model_bucket, prefix, [], metrics=True)
            self._grant_jobs(identity, jobs)
            self.identities[acc.name] = identity
            image = platform.image_uris[acc.name]
            init = (
                [njob.wait_init_container(cfg, image=image, bucket=bucket.bucket_name, region=region)]
                if acc.name == "neuron"
                else []
            )
            service_manifests.append(
                manifest(
                    f"{acc.name.capitalize()}Service",
                    [
                        workloads.service_account(acc, cfg),
                        workloads.accelerator_service(acc, cfg),
                        workloads.pod_disruption_budget(acc, cfg),
                    ],
                )
            )
            pods = [
                workloads.deployment(
                    acc,
                    cfg,
                    image=image,
                    model_uri=s3_uri(model_bucket.bucket_name, prefix),
                    region=region,
                    init_containers=init,
                    env_config_maps=auth_config_maps,
                    extra_env=jobs.service_env(),
                ),
                scaling.scaled_object(acc, cfg, region, jobs.queue.queue_url),
            ]
            # GPU pods load the weights at start, Neuron pods wait for the compile that needs them: neither
            # is applied before the weights are staged.
            pod_objects.append(
                (f"{acc.name.capitalize()}Workload", pods, [identity.association, policies, *after_weights])
            )

        if self.llm is not None:
            lb_cidrs = [subnet.ipv4_cidr_block for subnet in lb_subnets.subnets]
            service_manifests.append(manifest("LlmServices", self.llm.service_objects(lb_cidrs)))
            for acc in platform.accelerators:
                pod_objects.append(
                    (f"Llm{acc.name.capitalize()}Workload", self.llm.pod_objects(acc), self.llm.pod_dependencies(acc))
                )

        # The ScaledObjects' TriggerAuthentication, and the Ingress over the Services (its target groups
        # need them; the pods need its target groups, see below).
        shared = [scaling.trigger_authentication(cfg)]
        if self.weights is None:
            shared.append(workloads.capacity_service(cfg))
        self.web_acl = ServingWebAcl(
            self, "Waf", cfg=cfg, prompt_paths=ing.LLM_PROMPT_PATHS if self.llm is not None else ()
        )
        shared.append(
            ing.ingress(
                cfg,
                weights=self.weights,
                access_log_bucket=store.log_bucket.bucket_name if cfg.access_logs else None,
                waf_acl_arn=self.web_acl.arn,
                vpc_cidr=platform.vpc.vpc_cidr_block,
                subnet_ids=lb_subnets.subnet_ids,
                llm=self.llm.routes if self.llm is not None else None,
            )
        )
        front = manifest("Ingress", shared, *service_manifests)
        if cfg.runs_routing_controller and self.weights is not None:
            if platform.routing_controller_image is None:
                raise ValueError("routingMode cost-with-failover needs the routing controller image from the platform")
            controller_identity = self._routing_controller_identity(cfg, platform)
            manifest(
                "RoutingController",
                rcw.manifests(
                    cfg,
                    image=platform.routing_controller_image,
                    routed=rcw.pools(platform.accelerators, self.weights),
                    region=region,
                ),
                front,
                controller_identity.association,
            )
            if self.llm is not None and self.llm.weights is not None:
                llm_identity = self._routing_controller_identity(cfg, platform, llm=True)
                manifest(
                    "LlmRoutingController",
                    rcw.manifests(
                        cfg,
                        image=platform.routing_controller_image,
                        routed=rcw.llm_routing(platform.accelerators, self.llm.weights),
                        region=region,
                    ),
                    front,
                    llm_identity.association,
                )

        hostname = eks.KubernetesObjectValue(
            self,
            "AlbHostname",
            cluster=cluster,
            object_type="ingress",
            object_name=ing.INGRESS_NAME,
            object_namespace=cfg.namespace,
            json_path=".status.loadBalancer.ingress[0].hostname",
            # Shorter than the kubectl handler's own timeout, so a wait that ends is reported.
            timeout=deploy_limits.HOSTNAME_WAIT,
        )
        hostname.node.add_dependency(front)
        load_balancer = self._load_balancer_dimension(cfg, hostname)
        public_url = self._front_door(cfg, hostname.value, manifest)
        # The pods last: the load balancer controller injects its readiness gate only into pods created once
        # the Ingress's target groups exist (the ALB's hostname is written after them), and a pod reads the
        # sign-in ConfigMap (not optional) and its ScaledObject the TriggerAuthentication when it starts.
        before_pods: list[Construct] = [front, hostname]
        if self.sign_in_settings is not None:
            before_pods.append(self.sign_in_settings)
        self.workloads = {cid: manifest(cid, objects, *deps, *before_pods) for cid, objects, deps in pod_objects}
        self.url_output = CfnOutput(
            self, "ServiceUrl", value=f"{public_url}/", description="The Gradio UI and /v1/generate (sign-in required)"
        )
        inputs = DashboardInputs(
            accelerators=platform.accelerators,
            cluster_name=cluster.cluster_name,
            namespace=cfg.namespace,
            load_balancer=load_balancer,
            price_per_hour={a.name: cfg.per_accelerator[a.name].price_per_hour for a in platform.accelerators},
            routing_weights=cfg.runs_routing_controller,
            jobs=JobQueues(jobs.queue.queue_name, jobs.dead_letters.queue_name),
            llm=LlmDashboardInputs.from_config(llm, namespace=cfg.namespace) if llm is not None else None,
        )
        self.dashboard = ServingDashboard(self, "Dashboard", inputs=inputs, name=f"{construct_id}-serving")
        self.alarms = ServingAlarms(self, "Alarms", inputs=inputs, config=cfg)
        CfnOutput(self, "ModelStoreBucket", value=bucket.bucket_name, description="Stage weights under models/<slug>/")
        CfnOutput(self, "ModelWeightsUri", value=s3_uri(weights_bucket_name, weights_key))
        if compile_job is not None:
            CfnOutput(self, "NeuronArtifactsUri", value=s3_uri(bucket.bucket_name, njob.artifact_prefix(cfg)))
            CfnOutput(
                self,
                "NeuronCompileRerunCommand",
                value=njob.rerun_command(cfg),
                description="Re-runs a failed Neuron compile (docs/serving.md)",
            )
        CfnOutput(self, "JobsTopicArn", value=jobs.topic.topic_arn, description="Subscribe to hear of finished jobs")
        CfnOutput(self, "JobsDeadLetterQueueUrl", value=jobs.dead_letters.queue_url)
        if llm is not None:
            CfnOutput(
                self,
                "LlmBaseUrl",
                value=f"{public_url}/v1",
                description=f"OpenAI base URL of model {llm.served_model_name} (sign-in required)",
            )

    def _routing_controller_identity(
        self, cfg: ServingConfig, platform: PlatformHandle, *, llm: bool = False
    ) -> PodIdentityRole:
        """A controller's IAM role (the image routes', or with `llm` the OpenAI routes'): PutMetricData to the
        service's namespace, nothing else."""
        identity = PodIdentityRole(
            self,
            "LlmRoutingControllerIdentity" if llm else "RoutingControllerIdentity",
            cluster=platform.cluster,
            namespace=cfg.namespace,
            service_account=rcw.LLM_NAME if llm else rcw.NAME,
            statements=[put_metrics_statement(metric_names.NAMESPACE)],
            description="LLM routing controller: publish the RoutingWeight metric"
            if llm
            else "Routing controller: publish the RoutingWeight metric",
        )
        Validations.of(identity).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData has no resource-level scoping; it is limited by the "
                "cloudwatch:namespace condition to the service's own namespace.",
            )
        )
        return identity

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
        acknowledge_aws_custom_resource_provider(self)  # its provider function is a stack-level singleton
        arn = lookup.get_response_field("LoadBalancers.0.LoadBalancerArn")
        self.load_balancer_arn = arn
        return Fn.select(1, Fn.split("loadbalancer/", arn))

    def _read_weights_and(
        self, store: s3.IBucket, weights_bucket: s3.IBucket, weights_key: str, store_prefixes: list[str]
    ) -> list[iam.PolicyStatement]:
        """Read the weights (wherever they are) and `store_prefixes` of the model store."""
        if weights_bucket is store:
            return read_statements(store, [weights_key, *store_prefixes])
        return [
            *read_statements(store, store_prefixes),
            *read_statements(weights_bucket, [weights_key], sid_suffix="Brought"),
        ]

    def _acknowledge_reads(
        self,
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

    def _front_door(
        self, cfg: ServingConfig, alb_hostname: str, manifest: Callable[..., eks.KubernetesManifest]
    ) -> str:
        """CloudFront in front of the internal ALB, or the ALB's own HTTPS; then the sign-in's UI
        client and the pods' sign-in settings, which need the public URL. Returns that URL."""
        door = cfg.front_door
        self.edge: EdgeDistribution | None = None
        if door.route == "cloudfront":
            self.edge = EdgeDistribution(
                self, "Edge", cfg=cfg, alb_arn=self.load_balancer_arn, alb_hostname=alb_hostname
            )
            public_url = self.edge.url
        else:
            public_url = f"https://{door.domain_name}"
            CfnOutput(
                self, "LoadBalancerHostname", value=alb_hostname, description=f"Point {door.domain_name} here (CNAME)"
            )
        self.sign_in_settings: eks.KubernetesManifest | None = None
        if self.sign_in is not None:
            self.sign_in.add_ui_client(public_url)
            self.sign_in_settings = manifest("SignInSettings", [self.sign_in.config_map(cfg, public_url)])
            CfnOutput(self, "UserPoolId", value=self.sign_in.user_pool.user_pool_id, description="Invite users here")
            CfnOutput(
                self,
                "ApiClientId",
                value=self.sign_in.api_client.user_pool_client_id,
                description="Programs' app client (its secret: aws cognito-idp describe-user-pool-client)",
            )
            CfnOutput(self, "TokenUrl", value=self.sign_in.token_url, description="client-credentials grant")
            CfnOutput(self, "ApiScope", value=f"{RESOURCE_SERVER_ID}/{self.sign_in.generate_scope.scope_name}")
        return public_url
