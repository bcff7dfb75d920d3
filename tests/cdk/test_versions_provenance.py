"""Every pin in cdk/versions.py says where it was verified, or is on the "verify on first deploy" list.

A pin that nobody read at its tag is how a base image that does not exist reached a deploy; this
makes adding such a pin fail here, and keeps the checking commands in docs/first-deploy.md in step
with the pinned values.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import pytest

from cdk import versions
from tests.cdk.conftest import REPO_ROOT

VERSIONS_PY = REPO_ROOT / "cdk" / "versions.py"
CHECKLIST_MD = REPO_ROOT / "docs" / "first-deploy.md"
# `owner/repo@tag-or-commit path/in/repo`, or a registry package read at its version.
VERIFIED = re.compile(r"Verified: (?:[\w.-]+/[\w.-]+@[\w.+-]+ [\w./-]+[\w/]|(?:PyPI|npm) [\w.-]+==[\w.+-]+)")
FIRST_DEPLOY = "Verify on first deploy"
COMMAND = re.compile(r"`(?:aws|helm|docker) [^`]+`")


@dataclass(frozen=True)
class Pin:
    name: str
    value: str | tuple[str, ...]
    provenance: str  # the comment block right above the assignment


PINNED_ELSEWHERE = frozenset(v for v in vars(versions).values() if isinstance(v, str))


def pins() -> list[Pin]:
    """Public module-level string constants of cdk/versions.py (also tuples of strings, and per-accelerator
    dicts of strings that are not only other pins gathered) with their comments."""
    source = VERSIONS_PY.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if not isinstance(target, ast.Name) or target.id.startswith("_"):
            continue
        value = getattr(versions, target.id)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            if all(v in PINNED_ELSEWHERE for v in value.values()):
                continue  # aggregates such as BASE_IMAGES repeat pins checked on their own
            value = tuple(value.values())
        if not (isinstance(value, str) or (isinstance(value, tuple) and all(isinstance(v, str) for v in value))):
            continue
        comment = []
        row = node.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#"):
            comment.insert(0, lines[row].lstrip("# ").rstrip())
            row -= 1
        found.append(Pin(target.id, value, " ".join(comment)))
    return found


def first_deploy_rows() -> dict[str, str]:
    """The rows of docs/first-deploy.md's checklist whose check starts with a pin's name, by pin name."""
    rows = {}
    for line in CHECKLIST_MD.read_text().splitlines():
        match = re.match(r"\| `([A-Z0-9_]+)`", line)
        if match:
            rows[match.group(1)] = line
    return rows


def value_parts(value: str) -> list[str]:
    """What a checking command must name: the image's repository and tag, or the version without its prefix."""
    last = value.rsplit("/", 1)[-1]
    parts = [p.split("@")[-1] for p in last.split(":")]
    return [p[1:] if re.fullmatch(r"v\d.*", p) else p for p in parts if p]


ALL_PINS = pins()


def test_the_pins_are_found():
    names = {p.name for p in ALL_PINS}
    assert {"NVIDIA_BASE_IMAGE", "NEURON_BASE_IMAGE", "KARPENTER_CHART_VERSION", "AL2023_AMI_ALIAS"} <= names


@pytest.mark.parametrize("pin", ALL_PINS, ids=lambda p: p.name)
def test_every_pin_names_its_provenance(pin):
    verified = VERIFIED.search(pin.provenance)
    assert verified or FIRST_DEPLOY in pin.provenance, (
        f"{pin.name} = {pin.value!r} has no 'Verified: owner/repo@tag path' (or 'PyPI pkg==ver') "
        f"and no '{FIRST_DEPLOY}' note in the comment above it"
    )


@pytest.mark.parametrize("pin", [p for p in ALL_PINS if FIRST_DEPLOY in p.provenance], ids=lambda p: p.name)
def test_pins_left_to_the_first_deploy_have_a_command_naming_their_value(pin):
    row = first_deploy_rows().get(pin.name)
    assert row, f"{pin.name} is marked '{FIRST_DEPLOY}' but has no row in docs/first-deploy.md"
    assert COMMAND.search(row), f"{pin.name}'s row has no `aws ...`/`helm ...`/`docker ...` command"
    for part in value_parts(str(pin.value)):
        assert part in row, f"{pin.name}'s command does not name {part!r} (pinned {pin.value!r})"


def test_every_first_deploy_row_checks_the_current_pin():
    by_name = {p.name: p for p in ALL_PINS}
    for name, row in first_deploy_rows().items():
        assert name in by_name, f"docs/first-deploy.md lists {name}, which cdk/versions.py does not pin"
        for part in value_parts(str(by_name[name].value)):
            assert part in row, f"docs/first-deploy.md's command for {name} does not name {part!r}"


def test_the_pin_parser_rejects_a_pin_without_provenance():
    bare = Pin("EXAMPLE_CHART_VERSION", "1.0.0", "Some chart.")
    cited = Pin("EXAMPLE_CHART_VERSION", "1.0.0", "Verified: example/charts@v1.0.0 charts/example/Chart.yaml")
    assert not VERIFIED.search(bare.provenance) and FIRST_DEPLOY not in bare.provenance
    assert VERIFIED.search(cited.provenance)
    assert value_parts("123.dkr.ecr.{region}.amazonaws.com/pytorch:2.13.0-cu133-amzn2023") == [
        "pytorch",
        "2.13.0-cu133-amzn2023",
    ]
    assert value_parts("al2023@v20260828") == ["20260828"]
