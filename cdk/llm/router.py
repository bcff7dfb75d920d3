"""vLLM's router in front of one LLM pool (`llmRouter`), as plain dicts: ServiceAccount, Role, RoleBinding, Service,
PodDisruptionBudget, NetworkPolicy and Deployment.

The router (vllm-router, cdk/versions.py VLLM_ROUTER_VERSION) watches the pool's pods through the Kubernetes API and
adds each one once it is Running and Ready, at the gateway's port (vllm-project/router src/service_discovery.rs
`PodInfo::is_healthy`: the Ready condition True and phase Running). The gateway's readiness follows vLLM's, so only
pods with a loaded model are routed to; the router's own health check on the gateway's /readiness drops a pod that
stops being ready (discovery adds pods but only removes deleted ones). The gateway stays in every pod: sign-in,
admission, usage and metrics are its duties, whoever sends the request.

Its admin routes (/add_worker, /remove_worker, /list_workers, /workers, /get_loads, /flush_cache ...) share the
serving port, unauthenticated. Only the load balancer may reach the router (ROUTER_NETWORK_POLICY), the Ingress
routes only the OpenAI paths to it (Exact paths, cdk/llm/routes.py), and the WAF blocks the admin paths besides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cdk.accelerators import Accelerator
from cdk.checkov import k8s_skip_annotations
from cdk.config.serving import ServingConfig
from cdk.llm.names import GATEWAY_PORT, deployment_name
from cdk.llm.workload import APP_LABEL, selector_labels
from cdk.serving.network_policy import allow_port, allow_service_port
from cdk.serving.pod_shape import (
    INSTANCE_LABEL_KEY,
    TMP_DIR,
    Manifest,
    container_security_context,
    disruption_budget,
    pod_security_context,
    service,
)
from cdk.serving.routing import CONTAINER_PORT, PORT_NAME
from common.probe_paths import READINESS_PATH

ROUTER_LABEL: Final = {"app.kubernetes.io/name": "llm-router"}  # every router pod, of every pool
ROUTER_PORT: Final = CONTAINER_PORT
REPLICAS: Final = 2  # one may be evicted at a time (the PDB) while the other routes
ROUTER_NETWORK_POLICY: Final = "allow-llm-router-from-load-balancer"
GATEWAY_FROM_ROUTER_POLICY: Final = "allow-llm-gateway-from-router"
# The router's own probes, answered on its serving port (read from a running vllm-router 0.1.17): /liveness is 200
# while it runs; /readiness is 503 ("no healthy workers available") until one of the pool's pods is added.
LIVENESS_PATH: Final = "/liveness"
ROUTER_READINESS_PATH: Final = "/readiness"
# Seconds between the router's checks of each worker's /readiness (its default, 60, would keep an unready pod routed
# for a minute), and its whole-request bound, as the gateway's.
HEALTH_CHECK_INTERVAL_S: Final = 10
RESOURCES: Final = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit on purpose: the CFS quota would throttle the router mid-stream; memory is limited.",
    "CKV_K8S_15": "IfNotPresent: the tag names a hash of its inputs in an immutable ECR repository.",
    "CKV_K8S_38": "The router watches its pool's pods through the API: it needs its service account token.",
    "CKV_K8S_43": "A tag, not a digest: the digest only exists after the build that runs in the same deploy.",
}


def router_name(acc: Accelerator) -> str:
    """The router's Deployment, Service, ServiceAccount, Role and PDB in front of the pool on `acc`."""
    return f"{deployment_name(acc)}-router"


def router_selector(acc: Accelerator) -> dict[str, str]:
    """Labels that select exactly the router pods of the pool on `acc`."""
    return {**ROUTER_LABEL, INSTANCE_LABEL_KEY: router_name(acc)}


def router_args(acc: Accelerator, policy: str, cfg: ServingConfig) -> list[str]:
    """What follows `vllm-router`: listen on the pod's IP, route by `policy`, discover the pool's ready pods in the
    namespace by their labels and send to their gateways' port (flags of `vllm-router --help` at 0.1.17)."""
    selector = [f"{key}={value}" for key, value in selector_labels(acc).items()]
    return [
        "--host=0.0.0.0",
        f"--port={ROUTER_PORT}",
        f"--policy={policy}",
        "--service-discovery",
        "--selector",
        *selector,
        f"--service-discovery-port={GATEWAY_PORT}",
        f"--service-discovery-namespace={cfg.namespace}",
        f"--health-check-endpoint={READINESS_PATH}",
        f"--health-check-interval-secs={HEALTH_CHECK_INTERVAL_S}",
        f"--request-timeout-secs={cfg.request_timeout_s}",
    ]


def service_account(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The router's identity: its token is mounted (the pod watch needs it); no AWS role."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": router_name(acc), "namespace": cfg.namespace, "labels": dict(ROUTER_LABEL)},
    }


def role(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """get/list/watch pods in the serving namespace, nothing else (kube-rs's watcher lists, then watches)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": router_name(acc), "namespace": cfg.namespace, "labels": dict(ROUTER_LABEL)},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def role_binding(acc: Accelerator, cfg: ServingConfig) -> Manifest:
    """The Role to the router's ServiceAccount."""
    name = router_name(acc)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": cfg.namespace, "labels": dict(ROUTER_LABEL)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": cfg.namespace}],
    }


def deployment(acc: Accelerator, policy: str, cfg: ServingConfig, *, image: str) -> Manifest:
    """REPLICAS router pods, read-only root, non-root, spread over nodes."""
    name, labels = router_name(acc), router_selector(acc)
    http = {"port": PORT_NAME}
    container = {
        "name": "router",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": router_args(acc, policy, cfg),
        "ports": [{"name": PORT_NAME, "containerPort": ROUTER_PORT, "protocol": "TCP"}],
        "resources": RESOURCES,
        "readinessProbe": {"httpGet": {**http, "path": ROUTER_READINESS_PATH}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {**http, "path": LIVENESS_PATH}, "periodSeconds": 10, "failureThreshold": 3},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": cfg.namespace,
            "labels": labels,
            "annotations": k8s_skip_annotations(CHECKOV_SKIPS),
        },
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "automountServiceAccountToken": True,
                    "securityContext": pod_security_context(cfg),
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": labels},
                        }
                    ],
                },
            },
        },
    }


def network_policies(cfg: ServingConfig, load_balancer_cidrs: Sequence[str]) -> list[Manifest]:
    """Every pool's routers admit the load balancer's subnets only; the gateways admit the routers (in place of the
    load balancer, which no longer reaches them)."""
    return [
        allow_service_port(cfg, load_balancer_cidrs, name=ROUTER_NETWORK_POLICY, pods=ROUTER_LABEL, port=ROUTER_PORT),
        allow_port(
            cfg,
            name=GATEWAY_FROM_ROUTER_POLICY,
            pods=APP_LABEL,
            port=GATEWAY_PORT,
            peers=[{"podSelector": {"matchLabels": dict(ROUTER_LABEL)}}],
        ),
    ]


def service_manifests(acc: Accelerator, cfg: ServingConfig) -> list[Manifest]:
    """What the Ingress and the router pods need first: ServiceAccount, Role, RoleBinding, Service and PDB."""
    name = router_name(acc)
    return [
        service_account(acc, cfg),
        role(acc, cfg),
        role_binding(acc, cfg),
        service(name, router_selector(acc), cfg, labels=ROUTER_LABEL),
        disruption_budget(name, router_selector(acc), cfg),
    ]
