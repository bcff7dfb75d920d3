"""Every relative link in the README, the project files and docs/ leads to a file that exists, and to a heading
it has."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cdk.conftest import REPO_ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def documents() -> list[Path]:
    return [*sorted(REPO_ROOT.glob("*.md")), *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_every_relative_link_resolves():
    broken = []
    for doc in documents():
        for target in LINK.findall(FENCE.sub("", doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(REPO_ROOT)}: {target} (no such file)")
            elif anchor and (path.is_dir() or anchor not in anchors(path)):
                broken.append(f"{doc.relative_to(REPO_ROOT)}: {target} (no such heading)")
    assert broken == []
