"""On a team's cluster (existingClusterName): one row per prerequisite the serving stack relies on, read live.

The rows read what the deploy-time check reads (cdk/prerequisites.py: the objects each add-on puts in the cluster,
the CRD versions and the IngressClass controller our manifests need, the load balancer controller's release)
through the user's kubectl, and fail with the same line the deploy shows. A prerequisite the app installs, or one
this deploy does not rely on (the additions stack's ExpectedPrerequisites output lists those it does), is a SKIP;
on a cluster of our own all are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from cdk.prerequisites import PREREQUISITES, Prerequisite, Probe, VersionProbe
from verify.context import Context
from verify.kube import KubeError
from verify.result import Check, Outcome, failed, passed, skipped
from verify.stacks import ADDITIONS

EXPECTED_OUTPUT: Final = "ExpectedPrerequisites"  # cdk/stacks/cluster_additions_stack.py


def read(ctx: Context, probe: Probe) -> dict[str, Any] | None:
    """The probe's object through kubectl, None when the API says it does not exist."""
    try:
        return ctx.kube.get(probe.resource, probe.name, namespace=probe.namespace)
    except KubeError as exc:
        if "NotFound" in str(exc):
            return None
        raise


def expected_here(ctx: Context) -> list[str] | None:
    """The prerequisites this deploy relies on the team for; None on a cluster of our own."""
    listed = ctx.output(ADDITIONS, EXPECTED_OUTPUT)
    if listed is None:
        return None
    return [] if listed == "none" else [name.strip() for name in listed.split(",")]


def version_evidence(version: VersionProbe, deployments: dict[str, Any]) -> str:
    """The images the version probe read, or that it found none to read (then the version is not known)."""
    images = [
        c.get("image", "")
        for item in deployments.get("items", [])
        for c in item.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    ]
    if not images:
        return (
            f"no Deployment {version.selector} in {version.namespace}: its version (at least {version.minimum}) unread"
        )
    return f"{', '.join(i.rpartition(':')[2] for i in images)} (at least {version.minimum})"


def prerequisite_row(prerequisite: Prerequisite) -> Callable[[Context], Outcome]:
    """The row of one prerequisite: PASS naming what was found, FAIL with the deploy's line, else SKIP."""

    def run(ctx: Context) -> Outcome:
        expected = expected_here(ctx)
        if expected is None:
            return skipped("a cluster of our own (existingClusterName unset): the app installs it")
        if prerequisite.name not in expected:
            return skipped(f"not expected of the team's cluster ({prerequisite.setting}=install, or not relied on)")
        found = []
        for probe in prerequisite.probes:
            problem = probe.problem(read(ctx, probe))
            if problem is not None:
                return failed(prerequisite.message(problem))
            found.append(f"{probe.resource} {probe.name}" + (f" serves {probe.serves}" if probe.serves else ""))
        if prerequisite.version is not None:
            version = prerequisite.version
            deployments = ctx.kube.get("deployments", "--selector", version.selector, namespace=version.namespace)
            problem = version.problem(deployments)
            if problem is not None:
                return failed(prerequisite.message(problem))
            found.append(version_evidence(version, deployments))
        return passed("; ".join(found))

    return run


CHECKS: Final = tuple(Check(f"prerequisite-{p.name}", prerequisite_row(p)) for p in PREREQUISITES)
