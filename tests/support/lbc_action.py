"""An independent reading of the AWS Load Balancer Controller's `actions.<name>` annotation.

Written from kubernetes-sigs/aws-load-balancer-controller at tag v3.2.2, pkg/ingress/config_types.go
(Action, ForwardActionConfig, TargetGroupTuple and their validate() rules) and the ELBv2 limit of
0..999 per target group weight; it shares no code with the project's builder, so a drift in either
shows up as a failure.
"""

from __future__ import annotations

import json
from typing import Any

_TUPLE_KEYS = {"targetGroupARN", "targetGroupName", "serviceName", "servicePort", "weight"}
_FORWARD_KEYS = {"targetGroups", "targetGroupStickinessConfig"}
_ACTION_KEYS = {"type", "targetGroupARN", "targetGroupName", "fixedResponseConfig", "redirectConfig", "forwardConfig"}


class InvalidAction(ValueError):
    """The annotation would be rejected by the load balancer controller."""


def parse_weighted_forward(value: str) -> dict[str, int]:
    """Service name -> weight of a forward action over Services; InvalidAction if the LBC would refuse it."""
    try:
        action: dict[str, Any] = json.loads(value)
    except ValueError as exc:
        raise InvalidAction(f"not JSON: {exc}") from None
    if set(action) - _ACTION_KEYS:
        raise InvalidAction(f"unknown fields {sorted(set(action) - _ACTION_KEYS)}")
    if action.get("type") != "forward":
        raise InvalidAction("type must be forward")
    forward = action.get("forwardConfig")
    if forward is None:
        raise InvalidAction("missing ForwardConfig or TargetGroupARN/TargetGroupName")
    if "targetGroupARN" in action or "targetGroupName" in action:
        raise InvalidAction("either ForwardConfig or TargetGroupARN/TargetGroupName can be specified")
    if set(forward) - _FORWARD_KEYS:
        raise InvalidAction(f"unknown forwardConfig fields {sorted(set(forward) - _FORWARD_KEYS)}")
    groups = forward.get("targetGroups")
    if not isinstance(groups, list) or not groups:
        raise InvalidAction("targetGroups must be a non-empty list")
    weights: dict[str, int] = {}
    for group in groups:
        if set(group) - _TUPLE_KEYS:
            raise InvalidAction(f"unknown targetGroups fields {sorted(set(group) - _TUPLE_KEYS)}")
        if "serviceName" not in group:
            raise InvalidAction("missing serviceName (this project forwards to Services only)")
        if "servicePort" not in group or not isinstance(group["servicePort"], str | int):
            raise InvalidAction("missing servicePort (IntOrString)")
        weight = group.get("weight")
        if weight is None and len(groups) > 1:
            raise InvalidAction("weight must be set when route to multiple target groups")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 999:
            raise InvalidAction(f"weight {weight!r} is not an integer in 0..999")
        weights[group["serviceName"]] = weight
    stickiness = forward.get("targetGroupStickinessConfig", {})
    if not isinstance(stickiness.get("enabled", False), bool):
        raise InvalidAction("targetGroupStickinessConfig.enabled must be a boolean")
    return weights
