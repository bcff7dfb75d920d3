"""Kubernetes objects as the API returns them, for the controller's tests (plain dicts)."""

from __future__ import annotations

from routing_controller import annotation

NS, INGRESS, ACTION = "sd", "sd", "weighted"


def ingress_object(weights: dict[str, int]) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": INGRESS,
            "namespace": NS,
            "uid": "0b0e6c1e-0000-4000-8000-000000000001",
            "resourceVersion": "42",
            "annotations": {annotation.annotation_key(ACTION): annotation.encode(weights, 80)},
        },
        "spec": {
            "ingressClassName": "alb",
            "rules": [
                {
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": ACTION, "port": {"name": "use-annotation"}}},
                            }
                        ]
                    }
                }
            ],
        },
    }


def deployment(name: str, replicas: int) -> dict:
    labels = {"app.kubernetes.io/instance": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}},
        },
    }


def pod(owner: str, index: int, ready: bool) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{owner}-{index}", "namespace": NS, "labels": {"app.kubernetes.io/instance": owner}},
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def node_claim(pool: str, launched_problem: str | None) -> dict:
    launched = {"type": "Launched", "status": "False", "reason": launched_problem} if launched_problem else None
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": f"{pool}-x1", "labels": {"karpenter.sh/nodepool": pool}},
        "status": {"conditions": [launched] if launched else []},
    }
