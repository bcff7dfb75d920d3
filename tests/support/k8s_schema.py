"""Schema validation of Kubernetes manifests, offline.

Core kinds are checked with `kubernetes-validate` against the cluster's Kubernetes version; the
Karpenter and KEDA custom resources with the validators npm's `@kubernetes-models/*` generate from
the upstream CRDs (run through Node, which the CDK needs anyway).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_VALIDATOR = Path(__file__).with_name("validate_crds.mjs")
CRD_GROUPS = ("karpenter.sh/", "karpenter.k8s.aws/", "keda.sh/")


def is_custom_resource(manifest: Mapping[str, Any]) -> bool:
    """True for the Karpenter and KEDA kinds that the Kubernetes schema does not know."""
    return str(manifest.get("apiVersion", "")).startswith(CRD_GROUPS)


def validate_core(manifest: Mapping[str, Any], kubernetes_version: str) -> None:
    """Raise kubernetes_validate.ValidationError if a core manifest breaks the strict schema."""
    kubernetes_validate.validate(dict(manifest), f"{kubernetes_version}.0", strict=True)


def validate_custom_resources(manifests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return one failure record per custom resource that breaks its CRD schema (empty if none)."""
    batch = [dict(m) for m in manifests]
    if not batch:
        return []
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed to validate Karpenter/KEDA manifests (it is needed by the CDK too)")
    result = subprocess.run(
        [node, str(CRD_VALIDATOR)],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"CRD validator failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def validate_all(manifests: Iterable[Mapping[str, Any]], kubernetes_version: str) -> list[str]:
    """Validate every manifest by its kind; return readable problems (empty when all are valid)."""
    problems: list[str] = []
    custom: list[Mapping[str, Any]] = []
    for manifest in manifests:
        if is_custom_resource(manifest):
            custom.append(manifest)
            continue
        try:
            validate_core(manifest, kubernetes_version)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            name = manifest.get("metadata", {}).get("name", "?")
            problems.append(f"{manifest.get('kind')}/{name}: {exc}")
    for failure in validate_custom_resources(custom):
        name = custom[failure["index"]].get("metadata", {}).get("name", "?")
        problems.append(f"{failure['kind']}/{name}: {failure['error']}")
    return problems
