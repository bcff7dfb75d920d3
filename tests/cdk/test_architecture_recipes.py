"""docs/architecture.md's claims, checked where they can be read from the code (the recipes' synths are in
tests/cdk/test_recipe_synths.py): only the composition root names a workload, and the deploy's image families are
the service's."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

from app.models.families import FAMILIES as SERVICE_FAMILIES
from cdk.image.families import FAMILIES as DEPLOY_FAMILIES

CDK_ROOT: Final = Path(__file__).resolve().parents[2] / "cdk"
WORKLOAD_PACKAGES: Final = ("cdk.image", "cdk.llm")
# A workload's own folder, the settings and the composition root may name one (docs/architecture.md "Where the list
# is made").
ALLOWED: Final = ("image/", "llm/", "config/", "composition.py")


def named_workloads(source: Path) -> list[str]:
    """The workload modules `source` imports (at its top or in a function)."""
    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in WORKLOAD_PACKAGES)]
    return found


def test_only_the_composition_root_names_a_workload():
    naming = {
        str(path.relative_to(CDK_ROOT)): named
        for path in sorted(CDK_ROOT.rglob("*.py"))
        if not str(path.relative_to(CDK_ROOT)).startswith(ALLOWED) and (named := named_workloads(path))
    }
    assert naming == {}


def test_the_check_sees_a_workload_named_in_a_function(tmp_path):
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from cdk.image.presets import PRESETS\n    import cdk.llm.names\n")
    assert named_workloads(source) == ["cdk.image.presets", "cdk.llm.names"]


def test_the_deploys_image_families_are_the_services():
    assert list(DEPLOY_FAMILIES) == [family.name for family in SERVICE_FAMILIES]
