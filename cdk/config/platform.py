"""The platform's deploy-time settings: one frozen object read from CDK context and validated.

Every key is a flat camelCase context key in `cdk.json`, so `cdk synth -c neuronMaxVcpu=256` works.
`cdk.json` is the one place their values are written: a key missing from it is an error, except
the optional ones (account, region, vpcId) and the version pins whose defaults live in
cdk/versions.py (kubernetesVersion, <accelerator>BaseImage). Account and region may also come from
the CDK CLI (CDK_DEFAULT_ACCOUNT/REGION); without them the synth stops (cdk/config/environment.py).
A bad value stops the synth with a `ConfigError` that names the setting and what it accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from cdk import versions
from cdk.accelerators import ACCELERATORS, Accelerator
from cdk.config.access import AccessConfig
from cdk.config.context import ConfigError, Context
from cdk.config.environment import DeployEnvironment, resolve_base_image, resolve_environment
from cdk.config.existing_cluster import ExistingClusterConfig
from cdk.config.llm import LlmConfig
from cdk.config.observability import ObservabilityConfig
from cdk.config.pool_capacity import PoolUse, pool_rooms
from cdk.config.serving import ServingConfig

NodeProvisioner = Literal["karpenter", "managed"]
EndpointAccessMode = Literal["public-and-private", "private"]
CapacityType = Literal["spot", "on-demand"]

# Instance families each accelerator may use: a typo or a family without that accelerator would
# otherwise only show up as pods that never schedule.
ALLOWED_FAMILIES: dict[str, frozenset[str]] = {
    "neuron": frozenset({"inf2", "trn1", "trn1n", "trn2"}),
    "nvidia": frozenset({"g4dn", "g5", "g6", "g6e", "gr6", "p4d", "p5", "p5e", "p6"}),
}
# For managed node groups (no Karpenter) one concrete size per family is used.
MANAGED_INSTANCE_SIZE: dict[str, str] = {
    "inf2": "xlarge",
    "trn1": "2xlarge",
    "trn1n": "32xlarge",
    "trn2": "48xlarge",
    "g4dn": "xlarge",
    "g5": "xlarge",
    "g6": "xlarge",
    "g6e": "xlarge",
    "gr6": "4xlarge",
    "p4d": "24xlarge",
    "p5": "48xlarge",
    "p5e": "48xlarge",
    "p6": "48xlarge",
}
_CLUSTER_NAME = r"[A-Za-z][A-Za-z0-9-]{0,99}"
_VPC_ID = r"vpc-[0-9a-f]{8}([0-9a-f]{9})?"
_IMAGE_URI = r"[a-z0-9.-]+(\{region\}[a-z0-9.-]*)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+"
_ROLE_ARN = r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+"


@dataclass(frozen=True)
class AcceleratorCapacity:
    """How much accelerated capacity of one kind the cluster may add, and of what."""

    accelerator: Accelerator
    instance_families: tuple[str, ...]
    # In order of preference, Spot first: a Karpenter NodePool allowing both takes Spot while it can
    # be had and falls back to on-demand (managed node groups take exactly one).
    capacity_types: tuple[CapacityType, ...]
    max_vcpu: int  # Karpenter NodePool limit on cpu
    max_nodes: int  # managed node group max size
    base_image: str  # base image URI resolved for the deploy's region (and its DLC registry account)

    @property
    def name(self) -> str:
        """The accelerator's short name: neuron or nvidia."""
        return self.accelerator.name


@dataclass(frozen=True)
class AppConfig:
    """All deploy-time settings; frozen so no construct changes what another one reads."""

    environment: DeployEnvironment  # the one account and region every stack is synthesized for
    cluster_name: str
    kubernetes_version: str
    node_provisioner: NodeProvisioner
    capacity: tuple[AcceleratorCapacity, ...]  # enabled accelerators, in ACCELERATORS order
    endpoint_access: EndpointAccessMode
    endpoint_public_cidrs: tuple[str, ...]
    vpc_id: str | None
    vpc_cidr: str
    max_azs: int
    system_instance_type: str
    system_node_count: int
    admin_role_arns: tuple[str, ...]  # extra principals given cluster-admin access entries
    access: AccessConfig  # the deploying principal's access entry and the kubectl tunnel
    flow_log_retention_days: int
    observability: ObservabilityConfig  # what the cluster and VPC log (the observability bill)
    serving: ServingConfig  # what runs on the cluster: routing, workloads, scaling, alarms
    llm: LlmConfig | None  # LLM serving (llmEnabled), None when off
    # The team's cluster to serve on (existingClusterName), None for a cluster of our own.
    existing_cluster: ExistingClusterConfig | None = None

    @property
    def account(self) -> str:
        """The AWS account every stack deploys to."""
        return self.environment.account

    @property
    def region(self) -> str:
        """The AWS region every stack deploys to."""
        return self.environment.region

    @property
    def accelerators(self) -> tuple[Accelerator, ...]:
        """The enabled accelerators in a stable order."""
        return tuple(c.accelerator for c in self.capacity)

    def capacity_for(self, name: str) -> AcceleratorCapacity:
        """The capacity settings of one enabled accelerator."""
        for item in self.capacity:
            if item.name == name:
                return item
        raise KeyError(name)

    @classmethod
    def from_context(cls, values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> AppConfig:
        """Read and validate every platform setting; raise ConfigError naming the first bad one.

        `environ` holds the CDK CLI's CDK_DEFAULT_ACCOUNT/REGION (the app passes os.environ).
        """
        ctx = Context(values)
        cluster_name = ctx.string(
            "clusterName", pattern=_CLUSTER_NAME, description="1-100 letters, digits and hyphens, starting a letter"
        )
        kubernetes_version = ctx.string(
            "kubernetesVersion", versions.KUBERNETES_VERSION, allowed=versions.SUPPORTED_KUBERNETES_VERSIONS
        )
        provisioner = ctx.string("nodeProvisioner", allowed=("karpenter", "managed"))
        existing = ExistingClusterConfig.from_context(values)
        if existing is not None:
            # Its name is the one every consumer of clusterName reads (policies, tags, dashboards).
            cluster_name = existing.name
            if provisioner != "karpenter":
                raise ConfigError(
                    "setting 'nodeProvisioner' = 'managed' is invalid with existingClusterName: our capacity on a "
                    "team's cluster is Karpenter NodePools of our own (nodeProvisioner=karpenter)"
                )
        enabled = ctx.string_list("accelerators", allowed=tuple(ACCELERATORS))
        environment = resolve_environment(values, environ or {})
        capacity = tuple(
            _read_capacity(ctx, ACCELERATORS[name], environment.region) for name in ACCELERATORS if name in enabled
        )
        if provisioner == "managed":
            for item in capacity:
                if len(item.capacity_types) > 1:
                    raise ConfigError(
                        f"setting '{item.name}CapacityTypes' = {list(item.capacity_types)!r} is invalid with "
                        "nodeProvisioner=managed: a managed node group takes one capacity type (capacity fallback "
                        "needs nodeProvisioner=karpenter)"
                    )

        endpoint_access = ctx.string("endpointAccess", allowed=("public-and-private", "private"))
        public_cidrs = tuple(ctx.cidr_list("endpointPublicCidrs", allow_empty=True))
        if endpoint_access == "public-and-private" and not public_cidrs:
            raise ConfigError(
                "setting 'endpointPublicCidrs' is empty: with endpointAccess=public-and-private list the CIDR "
                "blocks allowed to reach the API (such as 203.0.113.0/24), or set endpointAccess=private"
            )
        if endpoint_access == "private" and public_cidrs:
            raise ConfigError("setting 'endpointPublicCidrs' must be empty when endpointAccess=private")
        if "0.0.0.0/0" in public_cidrs:
            raise ConfigError("setting 'endpointPublicCidrs' must not contain 0.0.0.0/0: restrict the public API")

        vpc_id = ctx.string("vpcId", None, pattern=_VPC_ID, description="a VPC id such as vpc-0123456789abcdef0")
        if vpc_id is not None and environment.example:
            raise ConfigError(
                "setting 'vpcId' needs a real environment: set 'account' and 'region' (or CDK_DEFAULT_ACCOUNT "
                "and CDK_DEFAULT_REGION) so that the VPC can be looked up; the example environment has no VPCs"
            )
        vpc_cidr = ctx.cidr_list("vpcCidr")
        if len(vpc_cidr) != 1 or not 16 <= int(vpc_cidr[0].split("/")[1]) <= 20:
            raise ConfigError(f"setting 'vpcCidr' = {vpc_cidr!r} is invalid: expected one IPv4 CIDR from /16 to /20")
        max_azs = ctx.integer("maxAzs", minimum=2, maximum=4)

        system_instance_type = ctx.string(
            "systemInstanceType",
            pattern=r"[a-z][a-z0-9-]*\.[a-z0-9]+",
            description="an EC2 instance type such as m7i.large",
        )
        system_node_count = ctx.integer("systemNodeCount", minimum=1, maximum=10)
        admin_role_arns = tuple(ctx.string_list("adminRoleArns", allow_empty=True))
        for arn in admin_role_arns:
            if not re.fullmatch(_ROLE_ARN, arn):
                raise ConfigError(
                    f"setting 'adminRoleArns' has {arn!r}: expected IAM role ARNs such as "
                    "arn:aws:iam::123456789012:role/Admin"
                )
        retention = ctx.integer("flowLogRetentionDays", minimum=1, maximum=3653)
        if retention not in _LOG_RETENTION_DAYS:
            raise ConfigError(
                f"setting 'flowLogRetentionDays' = {retention} is invalid: expected one of "
                + ", ".join(str(d) for d in sorted(_LOG_RETENTION_DAYS))
            )
        families = {c.name: c.instance_families for c in capacity}
        # Managed node groups launch one type per family; Karpenter whatever a pod's nodeSelector names.
        node_types = {c.name: managed_instance_types(c) for c in capacity} if provisioner == "managed" else None
        serving = ServingConfig.from_context(
            values, accelerators=[c.name for c in capacity], instance_families=families, node_instance_types=node_types
        )
        llm = LlmConfig.from_context(
            values, accelerators=[c.name for c in capacity], instance_families=families, node_instance_types=node_types
        )
        limits = {c.name: (c.max_vcpu, c.max_nodes if provisioner == "managed" else None) for c in capacity}
        rooms = pool_rooms(limits, pool_uses(serving, llm))
        return cls(
            environment=environment,
            cluster_name=cluster_name,
            kubernetes_version=kubernetes_version,
            node_provisioner=provisioner,
            capacity=capacity,
            endpoint_access=endpoint_access,
            endpoint_public_cidrs=public_cidrs,
            vpc_id=vpc_id,
            vpc_cidr=vpc_cidr[0],
            max_azs=max_azs,
            system_instance_type=system_instance_type,
            system_node_count=system_node_count,
            admin_role_arns=admin_role_arns,
            access=AccessConfig.from_context(values),
            flow_log_retention_days=retention,
            observability=ObservabilityConfig.from_context(ctx),
            serving=replace(serving, pool_rooms=rooms),
            llm=llm,
            existing_cluster=existing,
        )


def pool_uses(serving: ServingConfig, llm: LlmConfig | None) -> dict[str, list[PoolUse]]:
    """The Deployments each accelerated pool runs at their maximum: the image pool's and the LLM's."""
    uses: dict[str, list[PoolUse]] = {}
    for name, per in serving.per_accelerator.items():
        s = name[0].upper() + name[1:]
        uses.setdefault(name, []).append(
            PoolUse(f"scalingMaxReplicas{s}", f"servingInstanceType{s}", per.instance, per.max_replicas)
        )
    for name, replica in (llm.per_accelerator if llm else {}).items():
        s = name[0].upper() + name[1:]
        uses.setdefault(name, []).append(
            PoolUse(f"llmMaxReplicas{s}", f"llmInstanceType{s}", replica.instance, replica.max_replicas)
        )
    return uses


def managed_instance_types(capacity: AcceleratorCapacity) -> tuple[str, ...]:
    """One concrete instance type per configured family (managed node groups cannot take families)."""
    return tuple(f"{family}.{MANAGED_INSTANCE_SIZE[family]}" for family in capacity.instance_families)


# CloudWatch Logs accepts only these retention periods.
_LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)


def _read_capacity(ctx: Context, accelerator: Accelerator, region: str) -> AcceleratorCapacity:
    """Read `<name>InstanceFamilies`, `<name>CapacityTypes`, `<name>MaxVcpu`, `<name>MaxNodes`, `<name>BaseImage`."""
    name = accelerator.name
    families = tuple(ctx.string_list(f"{name}InstanceFamilies", allowed=sorted(ALLOWED_FAMILIES[name])))
    capacity_types = _read_capacity_types(ctx, name)
    max_vcpu = ctx.integer(f"{name}MaxVcpu", minimum=4, maximum=10000)
    max_nodes = ctx.integer(f"{name}MaxNodes", minimum=1, maximum=100)
    base_image = ctx.string(
        f"{name}BaseImage",
        versions.BASE_IMAGES[name],
        pattern=_IMAGE_URI,
        description="an image URI registry/repository:tag ({region} is replaced with the stack's region)",
    )
    try:
        base_image = resolve_base_image(base_image, region, default_dlc_account=versions.DLC_REGISTRY_ACCOUNT)
    except ValueError as exc:
        raise ConfigError(
            f"setting '{name}BaseImage': {exc}; give the full image URI for {region} (see the Deep Learning "
            "Containers available_images.md)"
        ) from None
    return AcceleratorCapacity(
        accelerator=accelerator,
        instance_families=families,
        capacity_types=capacity_types,
        max_vcpu=max_vcpu,
        max_nodes=max_nodes,
        base_image=base_image,
    )


# Karpenter's own order when a NodePool allows several capacity types: "Karpenter will prioritize
# `reserved` capacity, followed by `spot`, then finally `on-demand`" and falls back when EC2 reports
# no capacity (aws/karpenter-provider-aws, website/content/en/v1.14/concepts/nodepools.md, "Capacity
# Type", at 1d927085dd81a9df9301e613f371dac5b4d16bfe). The configured order must say the same.
_CAPACITY_PREFERENCE: tuple[CapacityType, ...] = ("spot", "on-demand")


def _read_capacity_types(ctx: Context, name: str) -> tuple[CapacityType, ...]:
    """`<name>CapacityTypes`: spot, on-demand or both in Karpenter's order of preference."""
    key = f"{name}CapacityTypes"
    legacy = f"{name}CapacityType"
    if ctx.raw(legacy, None) is not None:
        raise ConfigError(
            f"setting '{legacy}' was replaced by '{key}', a list in order of preference "
            '(such as ["spot", "on-demand"])'
        )
    types = ctx.string_list(key, allowed=_CAPACITY_PREFERENCE)
    if types != sorted(types, key=_CAPACITY_PREFERENCE.index):
        raise ConfigError(
            f"setting '{key}' = {types!r} is invalid: Karpenter takes spot before on-demand whenever a pool allows "
            "both, so list spot first"
        )
    return tuple(t for t in _CAPACITY_PREFERENCE if t in types)
