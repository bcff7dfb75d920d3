"""The starting gate's Kubernetes objects (servingStartingGate, docs/trial.md), as plain dicts.

The gate runs on the system nodes in front of the image pool: the Ingress sends the image routes to its Service,
and it proxies to the pool's Service, or answers "starting, about N minutes" while that Service has no ready pod
and publishes the demand as the pool's `Requests` (the metric the pool's KEDA trigger reads, so the pool scales
from zero). It answers the ALB's health check itself, so the front door stays up while the pool is at zero.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from cdk import versions
from cdk.accelerators import Accelerator
from cdk.checkov import k8s_skip_annotations
from cdk.cold_start import first_image_minutes
from cdk.config.serving import ServingConfig
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.constructs.image_builds import SHARED_RUNTIME, SmallImage
from cdk.image.metrics import image_unit
from cdk.image.workload import deployment_name
from cdk.serving import network_policy
from cdk.serving.pod_shape import (
    KEEP_ALIVE_MARGIN_S,
    POD_CHECKOV_SKIPS,
    Manifest,
    container_security_context,
    pod_identity_service_account,
)
from cdk.serving.pod_shape import service as cluster_ip_service
from cdk.serving.routing import CONTAINER_PORT, PORT_NAME, SERVICE_PORT
from common.probe_paths import HEALTH_PATH

# The gate's image (starting_gate/Dockerfile): its own package, the shared runtime and its buildspec.
STARTING_GATE_BUILDSPEC = "buildspecs/starting-gate.yml"
STARTING_GATE_EXCLUDES = [
    "*",
    ".*",
    "!starting_gate",
    "!starting_gate/**",
    *SHARED_RUNTIME,
    "!buildspecs",
    f"!{STARTING_GATE_BUILDSPEC}",
    "**/__pycache__",
    "**/*.pyc",
]

NAME: Final = "sd-starting-gate"  # its Deployment, Service and ServiceAccount
LABELS: Final = {"app.kubernetes.io/name": NAME}
RUN_AS_USER: Final = 10001  # the user starting_gate/Dockerfile creates
RETRY_AFTER_S: Final = 30
STARTING_GATE_IMAGE: Final = SmallImage(
    kind="starting-gate",
    build="startingGate",
    construct_prefix="StartingGate",
    buildspec=STARTING_GATE_BUILDSPEC,
    excludes=STARTING_GATE_EXCLUDES,
    base_image=versions.ROUTING_CONTROLLER_BASE_IMAGE,  # one slim Python 3.13 base (the lock is for 3.13)
    description="the starting gate image",
)
CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit: a small proxy whose CFS quota would only add latency to every request. Memory is "
    "limited.",
    "CKV_K8S_15": POD_CHECKOV_SKIPS["CKV_K8S_15"],
    "CKV_K8S_43": POD_CHECKOV_SKIPS["CKV_K8S_43"],
}


def upstream_url(acc: Accelerator, cfg: ServingConfig) -> str:
    """The pool's Service inside the cluster."""
    return f"http://{deployment_name(acc)}.{cfg.namespace}.svc.cluster.local:{SERVICE_PORT}"


def environment(acc: Accelerator, cfg: ServingConfig, region: str) -> list[dict[str, str]]:
    """What `starting_gate.settings.GateSettings` reads (the sign-in's settings come from the pods' ConfigMap)."""
    return [
        {"name": "UPSTREAM_URL", "value": upstream_url(acc, cfg)},
        {"name": "STARTING_MINUTES", "value": str(first_image_minutes(cfg.model_size_gi)[1])},
        {"name": "RETRY_AFTER_SECONDS", "value": str(RETRY_AFTER_S)},
        {"name": "DEMAND_UNITS", "value": json.dumps([image_unit(acc).dimensions], separators=(",", ":"))},
        {"name": "PORT", "value": str(CONTAINER_PORT)},
        # The ALB keeps idle connections to targets for its idle timeout; the gate must keep them longer (else a
        # request on a connection the gate just closed is a 502), and may wait as long for a silent pool.
        {"name": "KEEP_ALIVE_S", "value": str(cfg.idle_timeout_s + KEEP_ALIVE_MARGIN_S)},
        {"name": "UPSTREAM_TIMEOUT_S", "value": str(cfg.idle_timeout_s)},
        {"name": "SHUTDOWN_GRACE_S", "value": str(cfg.shutdown_grace_s)},
        {"name": "AWS_REGION", "value": region},
        {"name": "AWS_DEFAULT_REGION", "value": region},
    ]


def service_objects(cfg: ServingConfig) -> list[Manifest]:
    """Its ServiceAccount (no API token: Pod Identity only) and the Service the Ingress sends the image routes to."""
    return [
        pod_identity_service_account(NAME, LABELS, cfg),
        cluster_ip_service(NAME, dict(LABELS), cfg, labels=LABELS),
    ]


def deployment(
    acc: Accelerator, cfg: ServingConfig, *, image: str, region: str, env_config_maps: Sequence[str]
) -> Manifest:
    """Two replicas on the system nodes (one may restart while the other answers), restricted security, the sign-in
    settings from `env_config_maps` (the gate serves the browser sign-in and checks tokens before counting demand),
    and the services' stop: preStop while the ALB deregisters it, then the drain within the grace period."""
    http_probe = {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}, "periodSeconds": 10, "timeoutSeconds": 3}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": NAME,
            "namespace": cfg.namespace,
            "labels": dict(LABELS),
            "annotations": k8s_skip_annotations(CHECKOV_SKIPS),
        },
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": False,
                    "nodeSelector": dict(SYSTEM_NODE_LABEL),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": cfg.termination_grace_s,
                    "containers": [
                        {
                            "name": "gate",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "env": environment(acc, cfg, region),
                            "envFrom": [{"configMapRef": {"name": name}} for name in env_config_maps],
                            "ports": [{"name": PORT_NAME, "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
                            "readinessProbe": http_probe,
                            "livenessProbe": {**http_probe, "initialDelaySeconds": 10},
                            "lifecycle": {"preStop": {"sleep": {"seconds": cfg.pre_stop_s}}},
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "96Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            "securityContext": container_security_context(),
                        }
                    ],
                },
            },
        },
    }


def network_policies(
    cfg: ServingConfig, load_balancer_cidrs: Sequence[str], pool_labels: dict[str, str]
) -> list[Manifest]:
    """The gate admits the load balancer's subnets; the pool's pods admit the gate."""
    return [
        network_policy.allow_service_port(
            cfg, load_balancer_cidrs, pods=LABELS, name="allow-starting-gate-from-load-balancer"
        ),
        network_policy.allow_port(
            cfg,
            name="allow-image-pods-from-starting-gate",
            pods=pool_labels,
            port=CONTAINER_PORT,
            peers=[{"podSelector": {"matchLabels": dict(LABELS)}}],
        ),
    ]
