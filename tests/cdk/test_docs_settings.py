"""docs/settings.md names every setting the code reads, with the default it really has, and no other."""

from __future__ import annotations

import json
import re

from app.settings import Settings
from llm_gateway.settings import GatewaySettings
from tests.cdk.conftest import REPO_ROOT

SETTINGS_MD = REPO_ROOT / "docs" / "settings.md"
CONFIG_SOURCES = "\n".join(p.read_text() for p in sorted((REPO_ROOT / "cdk" / "config").glob("*.py")))
CONTEXT_KEY = re.compile(r"[a-z][A-Za-z0-9]+")


def documented_rows() -> dict[str, tuple[list[str], str]]:
    """Each name in a table row's first cell: (all names of that cell, its default cell)."""
    rows = {}
    for line in SETTINGS_MD.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        names = re.findall(r"`([^`]+)`", cells[0])
        for name in names:
            rows[name] = (names, cells[1])
    return rows


def default_of(name: str, rows: dict[str, tuple[list[str], str]]) -> str:
    """The documented default of one name: the matching item of a list of defaults, or the one default."""
    names, cell = rows[name]
    defaults = re.findall(r"`([^`]*)`", cell) or [cell]
    return defaults[names.index(name)] if len(defaults) == len(names) else defaults[0]


def test_every_service_setting_is_documented():
    rows = documented_rows()
    fields = {f.upper() for f in Settings.model_fields} | {f.upper() for f in GatewaySettings.model_fields}
    assert sorted(fields - set(rows)) == []


def test_every_deploy_setting_is_documented_with_its_cdk_json_value():
    rows = documented_rows()
    context = {k: v for k, v in json.loads((REPO_ROOT / "cdk.json").read_text())["context"].items() if k[0] != "@"}
    assert sorted(set(context) - set(rows)) == []
    for key, value in context.items():
        documented = default_of(key, rows).replace(" ", "")
        expected = json.dumps(value) if isinstance(value, (bool, list)) else str(value)
        if value == "":
            assert documented == "empty", key
        else:
            assert documented == expected.replace(" ", ""), f"{key}: documented {documented}, cdk.json {expected}"


def test_every_documented_deploy_setting_is_read_by_the_code():
    for name in documented_rows():
        if not CONTEXT_KEY.fullmatch(name) or name in {"true", "false", "cognito", "off", "retain"}:
            continue
        # Per-accelerator keys are read as f"...{suffix}" (servingCpuNeuron) or f"{name}..." (nvidiaMaxVcpu).
        stem = re.sub(r"(Neuron|Nvidia)$", "", name)
        tail = re.sub(r"^(neuron|nvidia)", "", name)
        assert f'"{name}"' in CONFIG_SOURCES or f'"{stem}{{' in CONFIG_SOURCES or f'}}{tail}"' in CONFIG_SOURCES, (
            f"docs/settings.md documents {name}, which cdk/config/ does not read"
        )
