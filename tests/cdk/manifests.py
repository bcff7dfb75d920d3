"""Turn the Kubernetes manifests and Helm values embedded in templates back into dicts."""

from __future__ import annotations

import json
from typing import Any

# Stand-ins for values only known at deploy time; shaped so that schema patterns still apply.
SECURITY_GROUP_PLACEHOLDER = "sg-0123456789abcdef0"


def _placeholder(intrinsic: dict[str, Any]) -> str:
    if "Fn::GetAtt" in intrinsic:
        logical, attribute = intrinsic["Fn::GetAtt"]
        if "SecurityGroup" in attribute or "SecurityGroup" in logical:
            return SECURITY_GROUP_PLACEHOLDER
        return f"{logical}.{attribute}"
    if "Ref" in intrinsic:
        return str(intrinsic["Ref"])
    return "TOKEN"


def render(value: Any) -> str:
    """A template string value (plain, or Fn::Join of strings and intrinsics) as one string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(p if isinstance(p, str) else _placeholder(p) for p in parts)
    raise TypeError(f"cannot render {value!r}")


def manifests(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest applied through aws_eks_v2's kubectl provider, in template order."""
    found: list[dict[str, Any]] = []
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            found.extend(json.loads(render(resource["Properties"]["Manifest"])))
    return found


def helm_charts(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Release name -> chart properties, with Values parsed."""
    charts = {}
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart":
            props = dict(resource["Properties"])
            props["Values"] = json.loads(render(props["Values"])) if "Values" in props else {}
            charts[props["Release"]] = props
    return charts
