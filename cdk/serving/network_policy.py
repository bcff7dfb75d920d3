"""NetworkPolicies of the serving namespace: nothing reaches a pod except its service port from the load balancer
(and whatever a workload admits besides, such as its benchmark's pods).

The ALB sends to pod IPs (target type ip) from its own subnets, which hold nothing but load balancers
(cdk/constructs/network.py; `ingressSubnetGroup` for an existing VPC): only their CIDRs are admitted.
Every pod has a VPC address, so admitting the VPC's CIDR would admit every pod of the cluster. Kubelet
probes need no rule: the VPC CNI's policy agent always admits the pod's own node (aws/aws-network-policy-agent
@c8619c056b4c pkg/fwruleprocessor/fw_rule_processor.go, "Traffic from the local node should always be
allowed"). Everything else inbound is denied, the compile Job's pods included. Policies are enforced
once the VPC CNI runs with enableNetworkPolicy (cdk/constructs/addons/vpc_cni.py). Egress stays open:
pods read the model store and publish metrics through the VPC's NAT gateways, whose addresses are not
known to the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cdk.config.serving import ServingConfig
from cdk.serving.routing import CONTAINER_PORT

DENY_INGRESS_NAME = "default-deny-ingress"
ALLOW_SERVICE_NAME = "allow-service-port-from-load-balancer"


def default_deny_ingress(cfg: ServingConfig) -> dict[str, Any]:
    """Every pod in the namespace: no inbound traffic unless another policy allows it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": DENY_INGRESS_NAME, "namespace": cfg.namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def allow_service_port(
    cfg: ServingConfig,
    load_balancer_cidrs: Sequence[str],
    *,
    pods: Mapping[str, str],
    name: str = ALLOW_SERVICE_NAME,
    port: int = CONTAINER_PORT,
) -> dict[str, Any]:
    """The pods labelled `pods`: TCP to `port` from the load balancer's subnets only."""
    if not load_balancer_cidrs:
        raise ValueError("the serving pods admit the load balancer's subnets: pass their CIDRs")
    return allow_port(
        cfg, name=name, pods=pods, port=port, peers=[{"ipBlock": {"cidr": c}} for c in load_balancer_cidrs]
    )


def allow_port(
    cfg: ServingConfig, *, name: str, pods: Mapping[str, str], port: int, peers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The pods labelled `pods`: TCP to `port` from `peers` (NetworkPolicy peers: ipBlock, podSelector) only."""
    if not peers:
        raise ValueError(f"NetworkPolicy {name} admits nobody: pass its peers")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": cfg.namespace},
        "spec": {
            "podSelector": {"matchLabels": dict(pods)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [dict(peer) for peer in peers], "ports": [{"protocol": "TCP", "port": port}]}],
        },
    }
