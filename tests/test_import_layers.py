"""Import arrows between the repository's top-level packages point down: the shared runtime (common/) at the
bottom, the services and programs on it, the CDK app above the constants it reads from them, the tools on top.

Every `import` in every source file counts, at a module's top or inside a function (a lazy import fails on the
cluster just the same). An image copies its own packages and common/ only, so an arrow that is not declared
here is a module missing from some image.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Each top-level package and the packages of the repository it may import; any other arrow is upward or sideways.
ALLOWED: Mapping[str, frozenset[str]] = {
    "common": frozenset(),
    "app": frozenset({"common"}),
    "llm_gateway": frozenset({"common"}),
    "model_fetch": frozenset({"common"}),
    "routing_controller": frozenset({"common"}),
    "starting_gate": frozenset({"common"}),
    "verify": frozenset({"cdk", "common", "llm_bench"}),
    "llm_local": frozenset({"common", "llm_gateway"}),
    "llm_bench": frozenset({"common", "llm_local"}),  # `--local` starts the local stack
    "lambdas": frozenset(),
    # The stacks read the services' constants (paths, labels, names), never the image service itself.
    # cdk/prerequisites.py reports what the deploy-time prerequisite check's handler reports (lambdas/).
    "cdk": frozenset({"common", "lambdas", "llm_gateway", "llm_bench", "routing_controller"}),
    # tools/router_workers.py starts vLLM's CPU engines as make run-llm does.
    "tools": frozenset({"cdk", "common", "llm_bench", "llm_gateway", "llm_local", "routing_controller"}),
}


def imported_packages(source: Path) -> Iterator[tuple[str, int]]:
    """(the top-level package, line) of every absolute import in `source` that names one of ALLOWED's packages."""
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"), filename=str(source))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in ALLOWED:
                yield top, node.lineno


def arrows(root: Path = REPO_ROOT) -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> where ("path:line"), for every package of ALLOWED under `root`."""
    found: dict[str, dict[str, list[str]]] = {}
    for package in ALLOWED:
        for source in sorted((root / package).rglob("*.py")):
            for top, line in imported_packages(source):
                if top != package:
                    found.setdefault(package, {}).setdefault(top, []).append(f"{source.relative_to(root)}:{line}")
    return found


def upward(found: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """The arrows ALLOWED does not declare, with where they are."""
    return [
        f"{package} -> {target} ({', '.join(places)})"
        for package, targets in found.items()
        for target, places in targets.items()
        if target not in ALLOWED[package]
    ]


def circle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of packages in `graph` (package -> the packages it imports), or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in graph.get(node, ()):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state:
                found = visit(target, [*path, target])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in graph:
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_every_arrow_between_packages_points_down():
    assert upward(arrows()) == []


def test_the_shared_runtime_imports_no_package_of_the_repository():
    assert arrows().get("common", {}) == {}


def test_no_circle_between_packages():
    assert circle(arrows()) is None
    assert circle(ALLOWED) is None  # the declared layers themselves have a bottom


def test_the_gateways_image_packages_import_nothing_of_the_image_service():
    found = arrows()
    assert not [package for package in ("llm_gateway", "model_fetch", "llm_bench") if "app" in found.get(package, {})]


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"common/x.py": "from app.settings import Settings\n"}, "common -> app (common/x.py:1)"),
        ({"llm_gateway/x.py": "def f():\n    import app.logs\n"}, "llm_gateway -> app (llm_gateway/x.py:2)"),
        ({"routing_controller/x.py": "from cdk.config import c\n"}, "routing_controller -> cdk"),
    ],
    ids=["common-upward", "lazy-sideways", "controller-upward"],
)
def test_the_layer_check_is_not_blind(tmp_path, files, expected):
    _write(tmp_path, files)
    assert any(problem.startswith(expected) for problem in upward(arrows(tmp_path)))


def test_the_circle_check_is_not_blind():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set(), "c": {"b"}}) is None
