"""The AWS Load Balancer Controller's weighted forward action, written and read back.

One definition for the CDK app (the Ingress it applies) and the controller (the patch it sends),
so the two cannot disagree. Shape verified in kubernetes-sigs/aws-load-balancer-controller at tag
v3.2.2: docs/guide/ingress/annotations.md (`actions.${action-name}`, advanced schema with
`forwardConfig.targetGroups[].serviceName/servicePort/weight`) and pkg/ingress/config_types.go
(`weight must be set when route to multiple target groups`); a numeric `servicePort` string such
as "80" is read as the port number (pkg/ingress/enhanced_backend_builder.go normalizes it with
intstr.Parse before k8s.LookupServicePort). Weights 0..999 are the ELBv2 TargetGroupTuple limits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

ANNOTATION_PREFIX: Final = "alb.ingress.kubernetes.io/actions."
MAX_WEIGHT: Final = 999


def annotation_key(action_name: str) -> str:
    """The Ingress annotation that holds the action named `action_name`."""
    return ANNOTATION_PREFIX + action_name


def forward_action(services_weights: Mapping[str, int], service_port: int) -> dict[str, Any]:
    """The action body: forward to each Service's `service_port` by weight, no stickiness."""
    for service, weight in services_weights.items():
        if not 0 <= weight <= MAX_WEIGHT:
            raise ValueError(f"weight {weight} of {service} is outside 0..{MAX_WEIGHT}")
    if services_weights and sum(services_weights.values()) == 0:
        raise ValueError("all forward weights are 0: no traffic would be served")
    return {
        "type": "forward",
        "forwardConfig": {
            "targetGroups": [
                {"serviceName": service, "servicePort": str(service_port), "weight": weight}
                for service, weight in services_weights.items()
            ],
            # No stickiness: each generation is independent, and stickiness would defeat the split.
            "targetGroupStickinessConfig": {"enabled": False},
        },
    }


def encode(services_weights: Mapping[str, int], service_port: int) -> str:
    """The annotation value: the action as compact JSON."""
    return json.dumps(forward_action(services_weights, service_port), separators=(",", ":"))


def decode_weights(value: str) -> dict[str, int]:
    """Service name -> weight from an annotation value this module wrote; ValueError otherwise."""
    try:
        action = json.loads(value)
        groups = action["forwardConfig"]["targetGroups"]
        return {str(g["serviceName"]): int(g["weight"]) for g in groups}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a weighted forward action: {exc}") from None


def patch_body(action_name: str, services_weights: Mapping[str, int], service_port: int) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) that sets only this action's annotation on the Ingress."""
    return {"metadata": {"annotations": {annotation_key(action_name): encode(services_weights, service_port)}}}
