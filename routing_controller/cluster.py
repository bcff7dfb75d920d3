"""What the cluster shows for each pool, read with the official Kubernetes client.

Calls (checked in the installed kubernetes==36.0.3 package): AppsV1Api.read_namespaced_deployment,
CoreV1Api.list_namespaced_pod, CustomObjectsApi.list_cluster_custom_object for Karpenter's
cluster-scoped NodeClaims (coordinates in routing_controller/nodeclaims.py).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from routing_controller import nodeclaims
from routing_controller.decision import PoolObservation
from routing_controller.heartbeat import API_TIMEOUT_S
from routing_controller.settings import Pool

# Every API call gives up after this long, so a stuck connection costs one period, not the loop.

LOG = logging.getLogger(__name__)


class ClusterReader:
    """Reads one pool's Deployment, its pods and its pool's NodeClaims into a PoolObservation."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self._node_claims_available = True

    def observe(self, pool: Pool) -> PoolObservation:
        """Desired replicas (KEDA's), ready and pending pods, and NodeClaims still launching."""
        deployment = self.apps.read_namespaced_deployment(
            pool.deployment, self.namespace, _request_timeout=API_TIMEOUT_S
        )
        desired = deployment.spec.replicas or 0
        labels = deployment.spec.selector.match_labels or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=selector, _request_timeout=API_TIMEOUT_S
        ).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase in ("Pending", "Running")]
        ready = sum(1 for p in live if _pod_ready(p))
        launching, problem = self._node_claims(pool.node_pool)
        return PoolObservation(
            desired=desired,
            ready=ready,
            pending=len(live) - ready,
            launching_nodes=launching,
            capacity_problem=problem,
        )

    def _node_claims(self, node_pool: str) -> tuple[int, str]:
        """(NodeClaims not yet initialized, the latest launch failure reason) for one NodePool."""
        if not self._node_claims_available:
            return 0, ""
        try:
            listed = self.custom.list_cluster_custom_object(
                nodeclaims.GROUP,
                nodeclaims.VERSION,
                nodeclaims.PLURAL,
                label_selector=f"{nodeclaims.NODEPOOL_LABEL}={node_pool}",
                _request_timeout=API_TIMEOUT_S,
            )
        except ApiException as exc:
            if exc.status == 404:  # no Karpenter (managed node groups): nothing to read, ever
                LOG.info("no karpenter.sh/v1 NodeClaims in this cluster; pools are observed by pods only")
                self._node_claims_available = False
                return 0, ""
            raise
        launching, problem = 0, ""
        for claim in listed.get("items", []):
            if claim.get("metadata", {}).get("deletionTimestamp"):
                continue
            conditions = {c.get("type"): c for c in claim.get("status", {}).get("conditions", [])}
            if conditions.get(nodeclaims.CONDITION_INITIALIZED, {}).get("status") == "True":
                continue
            launching += 1
            launched = conditions.get(nodeclaims.CONDITION_LAUNCHED, {})
            if launched.get("status") == "False":
                problem = launched.get("reason") or launched.get("message") or "launch failed"
        return launching, problem


def _pod_ready(pod: Any) -> bool:
    """The pod's Ready condition, which includes the load balancer controller's readiness gate."""
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
