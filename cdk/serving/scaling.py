"""KEDA objects as plain dicts, shared by every workload: the one TriggerAuthentication, a CloudWatch trigger on
one of the platform's metrics, and a Deployment's ScaledObject with the platform's polling, cooldown and HPA
behaviour.

KEDA reads CloudWatch with the operator's own workload identity (`identityOwner: keda`), so no
credentials live in this namespace; the operator's role needs cloudwatch:GetMetricData.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cdk.config.serving import ServingConfig
from cdk.observability import service_metrics as sm

TRIGGER_AUTH_NAME: Final = "keda-aws-operator-identity"
METRIC_PERIOD_S: Final = 60


def trigger_authentication(cfg: ServingConfig) -> dict[str, Any]:
    """Authenticate the aws-cloudwatch scaler as the KEDA operator (EKS Pod Identity / IRSA)."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": TRIGGER_AUTH_NAME, "namespace": cfg.namespace},
        "spec": {"podIdentity": {"provider": "aws", "identityOwner": "keda"}},
    }


def metric_trigger(
    dimensions: Mapping[str, str],
    metric: str,
    *,
    stat: str,
    target: float,
    region: str,
    metric_type: str | None = None,
) -> dict[str, Any]:
    """An aws-cloudwatch trigger on one of the platform's metrics for one deployment unit.

    `metric_type` "Value": the metric is already a per-pod figure (an average over the pods), so the HPA
    scales by current replicas x value / target; unset, KEDA's default AverageValue divides a total by the
    target. (KEDA's ScaleTriggers.metricType, kedacore/keda apis/keda/v1alpha1/scaledobject_types.go at
    01ee1d30b296, where CheckFallbackValid reads trigger.MetricType.)
    """
    trigger: dict[str, Any] = {
        "type": "aws-cloudwatch",
        "authenticationRef": {"name": TRIGGER_AUTH_NAME},
        "metadata": {
            "namespace": sm.NAMESPACE,
            "metricName": metric,
            # KEDA takes several dimensions separated by ';', names and values in the same order.
            "dimensionName": ";".join(dimensions.keys()),
            "dimensionValue": ";".join(dimensions.values()),
            "metricStat": stat,
            "metricStatPeriod": str(METRIC_PERIOD_S),
            "metricCollectionTime": str(METRIC_PERIOD_S * 5),
            "metricEndTimeOffset": str(METRIC_PERIOD_S),  # the newest minute is still being flushed
            "targetMetricValue": f"{target:g}",
            "minMetricValue": "0",
            "awsRegion": region,
        },
    }
    if metric_type is not None:
        trigger["metricType"] = metric_type
    return trigger


def scaled_deployment(
    deployment: str, cfg: ServingConfig, min_replicas: int, max_replicas: int, triggers: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ScaledObject of `deployment` (named after it) on `triggers`, with the platform's polling, cooldown
    and HPA behaviour."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": deployment, "namespace": cfg.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": cfg.scaling_polling_s,
            "cooldownPeriod": cfg.scaling_cooldown_s,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        # New accelerator nodes take minutes; do not drop pods on a short lull.
                        "scaleDown": {
                            "stabilizationWindowSeconds": cfg.scaling_cooldown_s,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
                        },
                        "scaleUp": {
                            "stabilizationWindowSeconds": 0,
                            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                        },
                    }
                }
            },
            "triggers": triggers,
        },
    }
