"""The serving stack: the chassis every workload runs on, and the workloads it is given.

    ServingStack(app, "SdOnEksServing", config=config.serving, workloads=workloads_for(config), platform=handle)

It owns the model store, the namespace and its default-deny NetworkPolicy, KEDA's TriggerAuthentication, the
front door (Ingress, WAF, CloudFront or the ALB's HTTPS, sign-in), a routing controller per weighted action,
the dashboard and the alarms, and asks each workload for its part at each stage (cdk/chassis/workload.py).

The ALB is created by the AWS Load Balancer Controller at run time from the Ingress, so its DNS
name is read back from the Ingress status with a kubectl-backed `KubernetesObjectValue`, and its
CloudWatch dimension (`app/<name>/<id>`) with one DescribeLoadBalancers call by its configured name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Fn, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk import deploy_limits
from cdk.chassis.workload import DeployContext, ManifestFactory, RoutingControllerSpec, StageContext, Workload
from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from cdk.constructs.empty_on_create_rollback import EmptyOnCreateRollback
from cdk.constructs.network import LOAD_BALANCER_SUBNET_GROUP, PUBLIC_SUBNET_GROUP
from cdk.constructs.pod_identity import PodIdentityRole
from cdk.front_door import ingress as ing
from cdk.front_door import routing_controller as rcw
from cdk.front_door.edge import EdgeDistribution
from cdk.front_door.routes import prompt_paths
from cdk.front_door.sign_in import CONFIG_MAP_NAME, RESOURCE_SERVER_ID, SignIn
from cdk.front_door.waf import ServingWebAcl
from cdk.nag import acknowledge_aws_custom_resource_provider
from cdk.observability.alarms import ServingAlarms
from cdk.observability.dashboard import ServingDashboard
from cdk.observability.sections import DashboardView
from cdk.platform_handle import PlatformHandle
from cdk.serving import network_policy, pod_shape, scaling
from cdk.serving.model_store import ModelStore
from cdk.serving.service_identity import put_metrics_statement
from common import metric_names


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
    """The chassis on the platform's cluster, and every workload on it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ServingConfig,
        platform: PlatformHandle,
        workloads: Sequence[Workload],
        **stack_kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **stack_kwargs)
        if not platform.accelerators:
            raise ValueError("the platform enables no accelerator: nothing to serve on")
        names = [w.name for w in workloads]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"workloads {names}: serve at least one, each once")
        cfg = config
        cluster = platform.cluster
        self.workloads = tuple(workloads)
        self.store = store = ModelStore(self, "ModelStore", retain=cfg.model_store_retain)
        staging = StageContext(scope=self, cfg=cfg, platform=platform, store=store)
        staged = [w.stage(staging) for w in self.workloads]
        # Deleted after the writers that depend on it (staging, the namespace and its pods), before the buckets.
        emptier = EmptyOnCreateRollback(
            self,
            "EmptyOnCreateRollback",
            buckets=[store.bucket, *(b for s in staged for b in s.buckets)],
            log_bucket=store.log_bucket,
        ).resource
        for writer in (w for s in staged for w in s.writers):
            writer.node.add_dependency(emptier)

        ns = eks.KubernetesManifest(self, "Namespace", cluster=cluster, manifest=[pod_shape.namespace(cfg)])
        ns.node.add_dependency(emptier)

        def manifest(cid: str, objects: list[dict[str, Any]], *deps: Construct) -> eks.KubernetesManifest:
            m = eks.KubernetesManifest(self, cid, cluster=cluster, manifest=objects)
            m.node.add_dependency(ns, *deps)
            return m

        # Inbound traffic is denied before any pod of the namespace starts; only the ALB's subnets reach the pods.
        lb_subnets = load_balancer_subnets(cfg, platform.vpc)
        lb_cidrs = [s.ipv4_cidr_block for s in lb_subnets.subnets]
        policies = manifest(
            "NetworkPolicies",
            [
                network_policy.default_deny_ingress(cfg),
                *(p for w in self.workloads for p in w.network_policies(staging, lb_cidrs)),
            ],
        )
        # Sign-in: the pods read its settings from a ConfigMap written once the public URL is known.
        signed_in = cfg.front_door.auth == "cognito"
        ctx = DeployContext(
            scope=self,
            cfg=cfg,
            platform=platform,
            store=store,
            manifest=manifest,
            network_policies=policies,
            load_balancer_cidrs=lb_cidrs,
            env_config_maps=(CONFIG_MAP_NAME,) if signed_in else (),
        )
        for w in self.workloads:
            w.deploy(ctx)
        self.sign_in = SignIn(self, "SignIn", cfg=cfg) if signed_in else None

        # What the Ingress and the pods refer to (ServiceAccounts, Services, PDBs) first; the Deployments and
        # their ScaledObjects last, once everything their pods need at creation exists.
        service_manifests = [
            manifest(spec.cid, spec.objects, *spec.deps) for w in self.workloads for spec in w.service_manifests(ctx)
        ]
        pod_specs = [spec for w in self.workloads for spec in w.pod_manifests(ctx)]

        # The ScaledObjects' TriggerAuthentication, and the Ingress over the Services (its target groups
        # need them; the pods need its target groups, see below).
        routes = [w.routes(staging) for w in self.workloads]
        self.web_acl = ServingWebAcl(self, "Waf", cfg=cfg, prompt_paths=prompt_paths(routes))
        front = manifest(
            "Ingress",
            [
                scaling.trigger_authentication(cfg),
                *(o for r in routes for o in r.objects),
                ing.ingress(
                    cfg,
                    routes=routes,
                    access_log_bucket=store.log_bucket.bucket_name if cfg.access_logs else None,
                    waf_acl_arn=self.web_acl.arn,
                    vpc_cidr=platform.vpc.vpc_cidr_block,
                    subnet_ids=lb_subnets.subnet_ids,
                ),
            ],
            *service_manifests,
        )
        if cfg.runs_routing_controller:
            for w in self.workloads:
                controller = w.routing_controller(staging)
                if controller is not None:
                    self._routing_controller(cfg, platform, controller, manifest, front)

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
        self.pod_manifests = {
            spec.cid: manifest(spec.cid, spec.objects, *spec.deps, *before_pods) for spec in pod_specs
        }
        for w in self.workloads:
            w.outputs(staging, public_url)
        view = DashboardView(
            cluster_name=cluster.cluster_name,
            namespace=cfg.namespace,
            load_balancer=load_balancer,
            routing_weights=cfg.runs_routing_controller,
        )
        self.dashboard = ServingDashboard(
            self, "Dashboard", view=view, workloads=self.workloads, name=f"{construct_id}-serving"
        )
        self.alarms = ServingAlarms(self, "Alarms", view=view, workloads=self.workloads, config=cfg)
        CfnOutput(
            self, "ModelStoreBucket", value=store.bucket.bucket_name, description="Stage weights under models/<slug>/"
        )

    def _routing_controller(
        self,
        cfg: ServingConfig,
        platform: PlatformHandle,
        spec: RoutingControllerSpec,
        manifest: ManifestFactory,
        front: Construct,
    ) -> None:
        """One routing controller instance, after the Ingress, and its IAM role: PutMetricData to the service's
        namespace, nothing else."""
        if platform.routing_controller_image is None:
            raise ValueError("routingMode cost-with-failover needs the routing controller image from the platform")
        prefix = spec.construct_prefix
        identity = PodIdentityRole(
            self,
            f"{prefix}RoutingControllerIdentity",
            cluster=platform.cluster,
            namespace=cfg.namespace,
            service_account=spec.routed.name,
            statements=[put_metrics_statement(metric_names.NAMESPACE)],
            description=spec.description,
        )
        Validations.of(identity).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData has no resource-level scoping; it is limited by the "
                "cloudwatch:namespace condition to the service's own namespace.",
            )
        )
        manifest(
            f"{prefix}RoutingController",
            rcw.manifests(cfg, image=platform.routing_controller_image, routed=spec.routed, region=self.region),
            front,
            identity.association,
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

    def _front_door(self, cfg: ServingConfig, alb_hostname: str, manifest: ManifestFactory) -> str:
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
