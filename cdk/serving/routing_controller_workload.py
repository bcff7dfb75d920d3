"""The routing controller's Kubernetes objects (cost-with-failover mode), as plain dicts.

It runs on the system nodes (no accelerator toleration), with a ServiceAccount whose namespaced Role
allows exactly what the loop calls in the serving namespace, and a ClusterRole that only reads
Karpenter NodeClaims (cluster-scoped). Its IAM role (Pod Identity) only publishes its metric.

RBAC cannot limit a patch to one annotation, so a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
GA since Kubernetes 1.30) and its binding deny any change the controller's ServiceAccount makes to the
Ingress other than the weighted action annotation, and any value of it that forwards elsewhere than the
accelerators' Services: the scheme, inbound CIDRs, WAF ACL, spec and labels stay as the deploy wrote them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.checkov import k8s_skip_annotations
from cdk.config.serving import ServingConfig
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.serving.ingress import INGRESS_NAME
from cdk.serving.routing import SERVICE_PORT, WEIGHTED_ACTION_NAME
from cdk.serving.workloads import POD_CHECKOV_SKIPS, container_security_context
from routing_controller import annotation, heartbeat, nodeclaims
from routing_controller.settings import ENV_POOLS, Pool, pools_env

NAME: Final = "sd-routing-controller"
# The non-root user routing_controller/Dockerfile creates (tests check the two agree).
RUN_AS_USER: Final = 10001
LABELS: Final = {"app.kubernetes.io/name": NAME}
# Checkov findings on the controller's pod that are the design (tests/cdk/test_checkov.py).
CHECKOV_SKIPS: Final = {
    "CKV_K8S_11": "No CPU limit: a 50m request for a loop that wakes once a period; a CFS quota would only delay "
    "its reaction to a pool that lost its nodes. Memory is limited.",
    "CKV_K8S_15": "IfNotPresent is exact: the image tag is immutable in ECR and names a hash of the controller's "
    "source, so a cached image is always the right one.",
    "CKV_K8S_38": "The controller reads Deployments, Pods and NodeClaims and patches the Ingress through the "
    "Kubernetes API (its Role and ClusterRole), which needs the service-account token.",
    "CKV_K8S_43": POD_CHECKOV_SKIPS["CKV_K8S_43"],
}


def heartbeat_probe(cfg: ServingConfig, pools: int) -> dict[str, Any]:
    """An exec probe that fails once no step has ended for three periods and one slow step (a hung loop)."""
    max_age = heartbeat.max_age_seconds(cfg.routing_controller.period_s, pools)
    return {
        "exec": {"command": ["python", "-m", "routing_controller.heartbeat", f"--max-age-seconds={max_age:g}"]},
        "periodSeconds": max(10, int(cfg.routing_controller.period_s)),
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


Manifest = dict[str, Any]


def cluster_role_name(cfg: ServingConfig) -> str:
    """Cluster-scoped names carry the namespace, so two serving namespaces do not collide."""
    return f"{cfg.namespace}-{NAME}-nodeclaims"


def pools(accelerators: Sequence[Accelerator], cost_weights: dict[str, int]) -> tuple[Pool, ...]:
    """What the controller routes between: Deployment, Service and NodePool per accelerator.

    The NodePool is named after the accelerator (cdk/constructs/node_pools.py node_class_name).
    Only accelerators with a cost weight are routed: an async-only one takes jobs, never requests.
    """
    return tuple(
        Pool(
            accelerator=a.name,
            deployment=a.deployment_name,
            service=a.deployment_name,
            node_pool=a.name,
            cost_weight=cost_weights[a.deployment_name],
        )
        for a in accelerators
        if a.deployment_name in cost_weights
    )


def service_account(cfg: ServingConfig) -> Manifest:
    """Its own identity: the Role below and a Pod Identity role for CloudWatch."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": cfg.namespace, "labels": dict(LABELS)},
    }


def role(cfg: ServingConfig) -> Manifest:
    """Read Deployments and Pods, get and patch the one Ingress, create Events: in this namespace only."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": NAME, "namespace": cfg.namespace, "labels": dict(LABELS)},
        "rules": [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": ["networking.k8s.io"],
                "resources": ["ingresses"],
                "resourceNames": [INGRESS_NAME],
                "verbs": ["get", "patch"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ],
    }


def role_binding(cfg: ServingConfig) -> Manifest:
    """Binds the Role to the controller's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": NAME, "namespace": cfg.namespace, "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": cfg.namespace}],
    }


def cluster_role(cfg: ServingConfig) -> Manifest:
    """Nothing cluster-wide but reading Karpenter NodeClaims (they are cluster-scoped)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": cluster_role_name(cfg), "labels": dict(LABELS)},
        "rules": [
            {"apiGroups": [nodeclaims.GROUP], "resources": [nodeclaims.PLURAL], "verbs": ["get", "list", "watch"]}
        ],
    }


def cluster_role_binding(cfg: ServingConfig) -> Manifest:
    """Binds the NodeClaim reader to the controller's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": cluster_role_name(cfg), "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role_name(cfg)},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": cfg.namespace}],
    }


def environment(cfg: ServingConfig, routed: tuple[Pool, ...], region: str) -> list[dict[str, Any]]:
    """The ROUTING_* settings routing_controller/settings.py reads, and the pod's own name."""
    rc = cfg.routing_controller
    values = {
        "ROUTING_NAMESPACE": cfg.namespace,
        "ROUTING_INGRESS": INGRESS_NAME,
        "ROUTING_ACTION": WEIGHTED_ACTION_NAME,
        "ROUTING_SERVICE_PORT": str(SERVICE_PORT),
        ENV_POOLS: pools_env(routed),
        "ROUTING_PERIOD_SECONDS": str(rc.period_s),
        "ROUTING_HOLD_SECONDS": str(rc.hold_s),
        "ROUTING_BAND_PODS": str(rc.band_pods),
        "ROUTING_METRICS": "cloudwatch",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
    }
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    return env


def deployment(cfg: ServingConfig, *, image: str, routed: tuple[Pool, ...], region: str) -> Manifest:
    """One replica (two would race on the same annotation), Recreate on update, restricted security."""
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
            "replicas": 1,
            "revisionHistoryLimit": 3,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": True,  # the Kubernetes API and Pod Identity need it
                    "nodeSelector": dict(SYSTEM_NODE_LABEL),  # the system node group
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": 30,
                    "containers": [
                        {
                            "name": "controller",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "env": environment(cfg, routed, region),
                            # Nothing routes to the controller; ready and live mean its loop keeps stepping.
                            "readinessProbe": heartbeat_probe(cfg, len(routed)),
                            "livenessProbe": {**heartbeat_probe(cfg, len(routed)), "initialDelaySeconds": 30},
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "128Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            "securityContext": container_security_context(),
                            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 - in the container
                        }
                    ],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def admission_policy_name(cfg: ServingConfig) -> str:
    """Cluster-scoped, so it carries the namespace like the ClusterRole."""
    return f"{cfg.namespace}-{NAME}-ingress-guard"


def service_account_username(cfg: ServingConfig) -> str:
    """The user name the API server gives the controller's requests."""
    return f"system:serviceaccount:{cfg.namespace}:{NAME}"


def weighted_action_pattern(routed: Sequence[Pool]) -> str:
    """An RE2 pattern for exactly what `routing_controller.annotation.encode` writes, forwarding only to the
    routed Services on the service port with weights 0..999 (no single quote: it sits in a CEL raw string)."""
    services = "|".join(pool.service for pool in routed)
    group = f'\\{{"serviceName":"({services})","servicePort":"{SERVICE_PORT}","weight":[0-9]{{1,3}}\\}}'
    return (
        '^\\{"type":"forward","forwardConfig":\\{"targetGroups":\\['
        + f"{group}(,{group})*"
        + '\\],"targetGroupStickinessConfig":\\{"enabled":false\\}\\}\\}$'
    )


def ingress_guard_validations(routed: Sequence[Pool]) -> list[dict[str, str]]:
    """CEL validations on an UPDATE of the Ingress by the controller (core CEL only: no Kubernetes library)."""
    key = annotation.annotation_key(WEIGHTED_ACTION_NAME)
    new, old = "object.metadata.annotations", "oldObject.metadata.annotations"
    return [
        {
            "expression": f"has({new}) && has({old}) && "
            f"{old}.all(k, k == '{key}' || (k in {new} && {new}[k] == {old}[k])) && "
            f"{new}.all(k, k == '{key}' || k in {old})",
            "message": f"the routing controller may change only the annotation {key}",
            "reason": "Forbidden",
        },
        {
            "expression": f"has({new}) && '{key}' in {new} && "
            f"{new}['{key}'].matches(r'{weighted_action_pattern(routed)}')",
            "message": f"{key} must be a weighted forward action to the accelerators' Services",
            "reason": "Forbidden",
        },
        {
            "expression": "object.spec == oldObject.spec",
            "message": "the routing controller may not change the Ingress's spec",
            "reason": "Forbidden",
        },
        {
            "expression": "has(object.metadata.labels) == has(oldObject.metadata.labels) && "
            "(!has(object.metadata.labels) || object.metadata.labels == oldObject.metadata.labels)",
            "message": "the routing controller may not change the Ingress's labels",
            "reason": "Forbidden",
        },
        {
            "expression": "has(object.metadata.finalizers) == has(oldObject.metadata.finalizers) && "
            "(!has(object.metadata.finalizers) || object.metadata.finalizers == oldObject.metadata.finalizers)",
            "message": "the routing controller may not change the Ingress's finalizers",
            "reason": "Forbidden",
        },
    ]


def ingress_guard_policy(cfg: ServingConfig, routed: Sequence[Pool]) -> Manifest:
    """Deny the controller's Ingress updates that change anything but the weighted action."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": admission_policy_name(cfg), "labels": dict(LABELS)},
        "spec": {
            # A policy that cannot be evaluated denies: the controller then changes nothing.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cfg.namespace}},
                "resourceRules": [
                    {
                        "apiGroups": ["networking.k8s.io"],
                        "apiVersions": ["*"],
                        "operations": ["UPDATE"],
                        "resources": ["ingresses"],
                        "resourceNames": [INGRESS_NAME],
                    }
                ],
            },
            # Only the controller is held to this; the deploy (the kubectl handler) changes the Ingress freely.
            "matchConditions": [
                {
                    "name": "routing-controller-only",
                    "expression": f"request.userInfo.username == '{service_account_username(cfg)}'",
                }
            ],
            "validations": ingress_guard_validations(routed),
        },
    }


def ingress_guard_binding(cfg: ServingConfig) -> Manifest:
    """Enforce the policy (Deny) in the serving namespace."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": admission_policy_name(cfg), "labels": dict(LABELS)},
        "spec": {
            "policyName": admission_policy_name(cfg),
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cfg.namespace}}},
        },
    }


def manifests(cfg: ServingConfig, *, image: str, routed: tuple[Pool, ...], region: str) -> list[Manifest]:
    """Every object of the controller, in apply order: the Ingress guard before the pod that could patch."""
    return [
        ingress_guard_policy(cfg, routed),
        ingress_guard_binding(cfg),
        service_account(cfg),
        role(cfg),
        role_binding(cfg),
        cluster_role(cfg),
        cluster_role_binding(cfg),
        deployment(cfg, image=image, routed=routed, region=region),
    ]
