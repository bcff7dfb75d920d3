"""docs/first-deploy.md and `make verify` in step: every check the command runs is named in the checklist's
`make verify` column, every name there is a check, and every other row says why it stays manual."""

from __future__ import annotations

import re
from pathlib import Path

from verify.runner import ALL_CHECKS

CHECKLIST = Path(__file__).resolve().parents[2] / "docs" / "first-deploy.md"
MANUAL = "manual: "


def verify_cells() -> list[str]:
    """The last cell of each row of the checklist's table."""
    lines = CHECKLIST.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| check |"))
    assert lines[header].rstrip(" |").endswith("`make verify`"), "the table's last column is `make verify`"
    rows = [line for line in lines[header + 2 :] if line.startswith("| ")]
    # A cell's text holds no unescaped '|' (commands escape theirs as '\|').
    return [re.split(r"(?<!\\)\|", row.strip().strip("|"))[-1].strip() for row in rows]


def test_every_row_is_automated_by_a_check_or_says_why_it_is_manual():
    for cell in verify_cells():
        if cell.startswith(MANUAL):
            assert len(cell) > len(MANUAL) + 10, f"a manual row gives its reason: {cell!r}"
        else:
            assert cell.startswith("`"), f"an automated row starts with its check's name: {cell!r}"


def test_the_checklist_and_the_command_name_the_same_checks():
    automated = [c for c in verify_cells() if not c.startswith(MANUAL)]
    named = {name for cell in automated for name in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", cell)}
    checks = {c.name for c in ALL_CHECKS}
    assert checks - named == set(), "checks the checklist does not name"
    assert named - checks == set(), "names in the checklist that are no check"
