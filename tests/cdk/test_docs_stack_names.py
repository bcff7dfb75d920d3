"""The stack and dashboard names the docs tell users to type exist in the app they deploy."""

from __future__ import annotations

import re

from cdk.build import STACK_PREFIX
from tests.cdk.conftest import REPO_ROOT, resources_of

# A stack-like name: "Sd" and a capitalized word (SdOnEksServing, and the SdServing that never existed).
STACK_NAME = re.compile(r"\bSd[A-Z][A-Za-z0-9]*")
DASHBOARD_NAME = re.compile(r"\b(Sd[A-Z][A-Za-z0-9]*-serving)\b")


def _documents() -> dict[str, str]:
    paths = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")), REPO_ROOT / "app.py"]
    paths += sorted((REPO_ROOT / "cdk").rglob("*.py"))
    return {str(p.relative_to(REPO_ROOT)): p.read_text() for p in paths}


def buildable_stacks() -> set[str]:
    """Every stack cdk/build.py can make, in any mode (an existing cluster's additions included)."""
    build = (REPO_ROOT / "cdk" / "build.py").read_text()
    return {STACK_PREFIX + name for name in re.findall(r'f"\{STACK_PREFIX\}(\w+)"', build)}


def test_every_stack_name_in_the_docs_exists(platform_synth):
    stacks = set(platform_synth.templates) | buildable_stacks()
    assert set(platform_synth.templates) <= buildable_stacks()
    mentioned = {}
    for path, text in _documents().items():
        for name in STACK_NAME.findall(text):
            if name != STACK_PREFIX:
                mentioned.setdefault(name, path)
    assert {f"{STACK_PREFIX}Serving", f"{STACK_PREFIX}Cluster"} <= set(mentioned)
    unknown = {name: path for name, path in mentioned.items() if name not in stacks}
    assert not unknown, f"names no stack of the app has: {unknown} (stacks: {sorted(stacks)})"


def test_every_dashboard_name_in_the_docs_exists(platform_synth):
    dashboards = {
        d["Properties"].get("DashboardName")
        for t in platform_synth.raw_templates.values()
        for d in resources_of(t, "AWS::CloudWatch::Dashboard").values()
    }
    mentioned = {n for text in _documents().values() for n in DASHBOARD_NAME.findall(text)}
    assert mentioned
    assert mentioned <= dashboards, (mentioned, dashboards)


# A stack output as the docs name it: `SdOnEksCluster.UpdateKubeconfig` (a template file name apart).
STACK_OUTPUT = re.compile(r"\b(Sd[A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9]*)\b")


def test_every_stack_output_in_the_docs_exists(platform_synth):
    mentioned = {}
    for path, text in _documents().items():
        for stack, output in STACK_OUTPUT.findall(text):
            mentioned.setdefault((stack, output), path)
    # The commands that follow the README's deploy: kubeconfig, tunnel, the front door.
    assert {(f"{STACK_PREFIX}Cluster", "UpdateKubeconfig"), (f"{STACK_PREFIX}Cluster", "KubectlTunnelSession")} <= set(
        mentioned
    )
    missing = {
        f"{stack}.{output}": path
        for (stack, output), path in mentioned.items()
        if output not in platform_synth.raw_templates.get(stack, {}).get("Outputs", {})
    }
    assert not missing, f"outputs no stack has: {missing}"
