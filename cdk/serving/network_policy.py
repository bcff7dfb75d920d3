"""NetworkPolicies of the serving namespace: nothing reaches a pod except the service port from the VPC.

The load balancer sends to pod IPs (target type ip) from its subnets, and kubelet probes come from
the node; both are inside the VPC CIDR. Everything else inbound is denied, the compile Job's pods
included. Policies are enforced once the VPC CNI runs with enableNetworkPolicy (cdk/constructs/
addons/vpc_cni.py). Egress stays open: pods read the model store and publish metrics through the
VPC's NAT gateways, whose addresses are not known to the cluster.
"""

from __future__ import annotations

from typing import Any

from cdk.config.serving import ServingConfig
from cdk.serving.routing import CONTAINER_PORT
from cdk.serving.workloads import APP_LABEL

DENY_INGRESS_NAME = "default-deny-ingress"
ALLOW_SERVICE_NAME = "allow-service-port-from-vpc"


def default_deny_ingress(cfg: ServingConfig) -> dict[str, Any]:
    """Every pod in the namespace: no inbound traffic unless another policy allows it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": DENY_INGRESS_NAME, "namespace": cfg.namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def allow_service_port(cfg: ServingConfig, vpc_cidr: str) -> dict[str, Any]:
    """The serving pods: TCP to the container port from inside the VPC (load balancer, kubelet probes)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": ALLOW_SERVICE_NAME, "namespace": cfg.namespace},
        "spec": {
            "podSelector": {"matchLabels": dict(APP_LABEL)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"ipBlock": {"cidr": vpc_cidr}}], "ports": [{"protocol": "TCP", "port": CONTAINER_PORT}]}
            ],
        },
    }
