"""The project carries one version: the services report common/version.py's, and pyproject.toml and the
changelog's newest release name the same."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from common.version import VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_names_the_services_version():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == VERSION


def test_the_changelogs_newest_release_is_this_version():
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert releases and releases[0] == VERSION, f"CHANGELOG.md's newest release is {releases[:1]}, the code's {VERSION}"
