"""Serving on an EKS cluster a team already runs: `existingClusterName` and what importing it needs.

`aws_eks_v2.Cluster.from_cluster_attributes` takes the cluster's name, its cluster security group, its VPC and a
kubectl provider; none of them can be looked up offline at synth, so each is a named setting (the VPC is the
existing `vpcId`, looked up as for a new cluster in an existing VPC). Each in-cluster prerequisite the serving
stack relies on has its own setting: `install` (ours, as on a new cluster) or `expect` (the team's, checked at
deploy time and by `make verify`). Nothing cluster-wide is installed unless its setting says `install`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from cdk.config.context import ConfigError, Context

AddOnMode = Literal["install", "expect"]
ADD_ON_MODES: Final = ("install", "expect")

# Each prerequisite's setting, by the prerequisite's short name (cdk/prerequisites.py says what each one is).
ADD_ON_SETTINGS: Final = {
    "karpenter": "existingClusterKarpenter",
    "load-balancer-controller": "existingClusterLoadBalancerController",
    "keda": "existingClusterKeda",
    "nvidia-device-plugin": "existingClusterNvidiaDevicePlugin",
    "neuron": "existingClusterNeuron",
    "pod-identity-agent": "existingClusterPodIdentityAgent",
    "cloudwatch-agent": "existingClusterCloudWatchAgent",
}

_CLUSTER_NAME = r"[A-Za-z][A-Za-z0-9-]{0,99}"
_SECURITY_GROUP = r"sg-[0-9a-f]{8}([0-9a-f]{9})?"
_ROLE_ARN = r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+"
_ROLE_NAME = r"[\w+=,.@-]{1,64}"


@dataclass(frozen=True)
class ExistingClusterConfig:
    """The imported cluster's attributes and, per prerequisite, whether we install it or expect the team's."""

    name: str
    security_group_id: str  # the cluster security group EKS made: our nodes and the kubectl handler join it
    kubectl_role_arn: str  # a role the team maps to cluster-admin; the kubectl handler Lambda runs as it
    node_role_name: str | None  # the team's Karpenter node role, which their controller may pass (karpenter=expect)
    add_ons: Mapping[str, AddOnMode]  # prerequisite short name -> install or expect

    def installs(self, add_on: str) -> bool:
        """Whether the app installs this prerequisite (else it expects the team's)."""
        return self.add_ons[add_on] == "install"

    @property
    def expected(self) -> tuple[str, ...]:
        """The prerequisites the team's cluster must already run, in ADD_ON_SETTINGS order."""
        return tuple(name for name, mode in self.add_ons.items() if mode == "expect")

    @classmethod
    def from_context(cls, values: Mapping[str, Any]) -> ExistingClusterConfig | None:
        """Read `existingClusterName` and, when it is set, the attributes the import needs (each required, a
        missing one stops the synth naming it) and the add-on settings (default `expect`); None when unset."""
        ctx = Context(values)
        name = ctx.raw("existingClusterName", "") or None
        if name is None:
            for key in (*ADD_ON_SETTINGS.values(), "existingClusterSecurityGroupId", "existingClusterKubectlRoleArn"):
                if ctx.raw(key, None) is not None:
                    raise ConfigError(f"setting '{key}' applies only with existingClusterName: set it, or drop {key}")
            return None
        name = ctx.string("existingClusterName", pattern=_CLUSTER_NAME, description="an EKS cluster's name")
        if ctx.raw("vpcId", None) is None:
            raise ConfigError(
                "setting 'vpcId' is required with existingClusterName: the id of the VPC the cluster runs in "
                "(aws eks describe-cluster --name NAME --query cluster.resourcesVpcConfig.vpcId)"
            )
        security_group = _required(
            ctx,
            "existingClusterSecurityGroupId",
            _SECURITY_GROUP,
            "the cluster security group EKS created (aws eks describe-cluster --name NAME "
            "--query cluster.resourcesVpcConfig.clusterSecurityGroupId)",
        )
        kubectl_role = _required(
            ctx,
            "existingClusterKubectlRoleArn",
            _ROLE_ARN,
            "an IAM role ARN that Lambda may assume and that has a cluster-admin access entry on the cluster",
        )
        add_ons: dict[str, AddOnMode] = {
            short: ctx.string(key, "expect", allowed=ADD_ON_MODES) for short, key in ADD_ON_SETTINGS.items()
        }
        node_role = None
        if add_ons["karpenter"] == "expect":
            node_role = _required(
                ctx,
                "existingClusterNodeRoleName",
                _ROLE_NAME,
                "the name of the node role the team's Karpenter launches nodes with (existingClusterKarpenter="
                "expect), or set existingClusterKarpenter=install",
            )
        return cls(
            name=name,
            security_group_id=security_group,
            kubectl_role_arn=kubectl_role,
            node_role_name=node_role,
            add_ons=add_ons,
        )


def _required(ctx: Context, key: str, pattern: str, description: str) -> str:
    """A setting the import cannot do without: its absence stops the synth with its name and what it takes."""
    if ctx.raw(key, None) is None:
        raise ConfigError(f"setting '{key}' is required with existingClusterName: {description}")
    value: str = ctx.string(key, pattern=pattern, description=description)
    return value
