"""The image pools' Deployments and which of them KEDA holds at zero replicas (a trial at rest): a pod check
that finds no image pod because every pool is at zero skips, saying so, instead of failing."""

from __future__ import annotations

from typing import Any, Final

from verify.context import Context

# Every image pod's label (cdk/image/workload.py APP_LABEL; tests/verify/test_names.py holds it).
IMAGE_POD_LABEL: Final = ("app.kubernetes.io/name", "stable-diffusion")
IMAGE_POD_SELECTOR: Final = "=".join(IMAGE_POD_LABEL)


def replicas(deployment: dict[str, Any]) -> int:
    """The replicas a Deployment asks for (the API server defaults an absent count to one)."""
    return int(deployment.get("spec", {}).get("replicas", 1))


def image_deployments(ctx: Context) -> list[dict[str, Any]]:
    """The namespace's Deployments whose pods are image pods (one per accelerator pool)."""
    key, value = IMAGE_POD_LABEL
    return [
        d
        for d in ctx.kube.items("deployments")
        if d["spec"]["template"].get("metadata", {}).get("labels", {}).get(key) == value
    ]


def at_rest(ctx: Context) -> str | None:
    """Why no image pod is expected (every image pool is at zero replicas), or None where one should run."""
    pools = image_deployments(ctx)
    if not pools or any(replicas(d) for d in pools):
        return None
    names = ", ".join(d["metadata"]["name"] for d in pools)
    return f"{names} at zero replicas (at rest: KEDA starts a pod on demand); no image pod to check"
