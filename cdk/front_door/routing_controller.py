"""The routing controller's Kubernetes objects (cost-with-failover mode), as plain dicts.

It runs on the system nodes (no accelerator toleration), with a ServiceAccount whose namespaced Role
allows exactly what the loop calls in the serving namespace, and a ClusterRole that only reads
Karpenter NodeClaims (cluster-scoped). Its IAM role (Pod Identity) only publishes its metric.

RBAC cannot limit a patch to one annotation, so a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
GA since Kubernetes 1.30) and its binding deny any change the controller's ServiceAccount makes to the
Ingress other than the weighted action annotation, and any value of it that forwards elsewhere than the
accelerators' Services: the scheme, inbound CIDRs, WAF ACL, spec and labels stay as the deploy wrote them.

One instance per routed action (`RoutedAction`): each workload's weighted action at the front door, between
that workload's per-accelerator pools. Each instance has its own objects, named after it, and its guard lets it
change only its own action, to only its own pools' Services.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk.accelerators import Accelerator
from cdk.checkov import k8s_skip_annotations
from cdk.config.serving import ServingConfig
from cdk.constructs.cluster import SYSTEM_NODE_LABEL
from cdk.front_door.ingress import INGRESS_NAME
from cdk.serving.pod_shape import POD_CHECKOV_SKIPS, container_security_context
from cdk.serving.routing import SERVICE_PORT
from routing_controller import annotation, heartbeat, nodeclaims
from routing_controller.settings import ENV_POOLS, Pool, pools_env

# The non-root user routing_controller/Dockerfile creates (tests check the two agree).
RUN_AS_USER: Final = 10001
# A DNS-1123 label: object names, and Service names that sit unescaped in the guard's regex.
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
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


@dataclass(frozen=True)
class RoutedAction:
    """One controller instance: the Ingress action it moves, between which pools, under which name."""

    name: str  # names (and labels) every object of the instance; its ServiceAccount's name
    action: str  # the LBC action it moves: the annotation alb.ingress.kubernetes.io/actions.<action>
    pools: tuple[Pool, ...]

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.name):
            raise ValueError(f"routing controller name {self.name!r} is not a DNS label")
        # The key's name part (actions.<action>) is at most 63 characters of [-A-Za-z0-9_.]; the guard quotes it.
        if not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,53}[A-Za-z0-9])?", self.action):
            raise ValueError(f"routing controller {self.name}: action {self.action!r} is no valid LBC action name")
        if not self.pools:
            raise ValueError(f"routing controller {self.name}: no pool to route {self.action} between")
        services = [p.service for p in self.pools]
        bad = [s for s in services if not _DNS_LABEL.match(s)]
        if bad or len(set(services)) != len(services):
            raise ValueError(f"routing controller {self.name}: Services {services} must be distinct DNS labels")

    @property
    def labels(self) -> dict[str, str]:
        """The labels of every object of this instance (its pod selector too)."""
        return {"app.kubernetes.io/name": self.name}


def cluster_role_name(cfg: ServingConfig, routed: RoutedAction) -> str:
    """Cluster-scoped names carry the namespace, so two serving namespaces do not collide."""
    return f"{cfg.namespace}-{routed.name}-nodeclaims"


def pools(
    accelerators: Sequence[Accelerator], weights: Mapping[str, int], service: Callable[[Accelerator], str]
) -> tuple[Pool, ...]:
    """One pool per accelerator whose Service (also its Deployment, named `service(acc)`) has a weight, on the
    accelerator's NodePool. An accelerator without a weight (the image service's async-only one) is not routed.

    The NodePool is named after the accelerator (cdk/constructs/node_pools.py node_class_name).
    """
    return tuple(
        Pool(
            accelerator=a.name,
            deployment=service(a),
            service=service(a),
            node_pool=a.name,
            cost_weight=weights[service(a)],
        )
        for a in accelerators
        if service(a) in weights
    )


def service_account(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Its own identity: the Role below and a Pod Identity role for CloudWatch."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": routed.name, "namespace": cfg.namespace, "labels": routed.labels},
    }


def role(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Read Deployments and Pods, get and patch the one Ingress, create Events: in this namespace only."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": routed.name, "namespace": cfg.namespace, "labels": routed.labels},
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


def role_binding(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Binds the Role to the controller's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": routed.name, "namespace": cfg.namespace, "labels": routed.labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": routed.name},
        "subjects": [{"kind": "ServiceAccount", "name": routed.name, "namespace": cfg.namespace}],
    }


def cluster_role(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Nothing cluster-wide but reading Karpenter NodeClaims (they are cluster-scoped)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": cluster_role_name(cfg, routed), "labels": routed.labels},
        "rules": [
            {"apiGroups": [nodeclaims.GROUP], "resources": [nodeclaims.PLURAL], "verbs": ["get", "list", "watch"]}
        ],
    }


def cluster_role_binding(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Binds the NodeClaim reader to the controller's ServiceAccount."""
    name = cluster_role_name(cfg, routed)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": routed.labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": routed.name, "namespace": cfg.namespace}],
    }


def environment(cfg: ServingConfig, routed: RoutedAction, region: str) -> list[dict[str, Any]]:
    """The ROUTING_* settings routing_controller/settings.py reads, and the pod's own name."""
    rc = cfg.routing_controller
    values = {
        "ROUTING_NAMESPACE": cfg.namespace,
        "ROUTING_INGRESS": INGRESS_NAME,
        "ROUTING_ACTION": routed.action,
        "ROUTING_SERVICE_PORT": str(SERVICE_PORT),
        ENV_POOLS: pools_env(routed.pools),
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


def deployment(cfg: ServingConfig, *, image: str, routed: RoutedAction, region: str) -> Manifest:
    """One replica (two would race on the same annotation), Recreate on update, restricted security."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": routed.name,
            "namespace": cfg.namespace,
            "labels": routed.labels,
            "annotations": k8s_skip_annotations(CHECKOV_SKIPS),
        },
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 3,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": routed.labels},
            "template": {
                "metadata": {"labels": routed.labels},
                "spec": {
                    "serviceAccountName": routed.name,
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
                            "readinessProbe": heartbeat_probe(cfg, len(routed.pools)),
                            "livenessProbe": {**heartbeat_probe(cfg, len(routed.pools)), "initialDelaySeconds": 30},
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


def admission_policy_name(cfg: ServingConfig, routed: RoutedAction) -> str:
    """Cluster-scoped, so it carries the namespace like the ClusterRole."""
    return f"{cfg.namespace}-{routed.name}-ingress-guard"


def service_account_username(cfg: ServingConfig, routed: RoutedAction) -> str:
    """The user name the API server gives the controller's requests."""
    return f"system:serviceaccount:{cfg.namespace}:{routed.name}"


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


def ingress_guard_validations(routed: RoutedAction) -> list[dict[str, str]]:
    """CEL validations on an UPDATE of the Ingress by the controller (core CEL only: no Kubernetes library)."""
    key = annotation.annotation_key(routed.action)
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
            f"{new}['{key}'].matches(r'{weighted_action_pattern(routed.pools)}')",
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


def ingress_guard_policy(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Deny the controller's Ingress updates that change anything but its weighted action."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": admission_policy_name(cfg, routed), "labels": routed.labels},
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
                    "expression": f"request.userInfo.username == '{service_account_username(cfg, routed)}'",
                }
            ],
            "validations": ingress_guard_validations(routed),
        },
    }


def ingress_guard_binding(cfg: ServingConfig, routed: RoutedAction) -> Manifest:
    """Enforce the policy (Deny) in the serving namespace."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": admission_policy_name(cfg, routed), "labels": routed.labels},
        "spec": {
            "policyName": admission_policy_name(cfg, routed),
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cfg.namespace}}},
        },
    }


def manifests(cfg: ServingConfig, *, image: str, routed: RoutedAction, region: str) -> list[Manifest]:
    """Every object of one controller instance, in apply order: the Ingress guard before the pod that could patch."""
    return [
        ingress_guard_policy(cfg, routed),
        ingress_guard_binding(cfg, routed),
        service_account(cfg, routed),
        role(cfg, routed),
        role_binding(cfg, routed),
        cluster_role(cfg, routed),
        cluster_role_binding(cfg, routed),
        deployment(cfg, image=image, routed=routed, region=region),
    ]
