"""Keep benchmark results in a markdown file: one marked section per measured configuration.

A section sits between `<!-- bench:KEY -->` and `<!-- /bench:KEY -->`. Writing a key that is
already there replaces that section (a rerun updates its figures); a new key is appended at the
end. Everything outside the markers (hand-written provenance, commands) is left alone.
"""

from __future__ import annotations

import re
from pathlib import Path


def _markers(key: str) -> tuple[str, str]:
    if "-->" in key or "\n" in key:
        raise ValueError(f"a section key cannot contain '-->' or a newline: {key!r}")
    return f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"


def update_section(path: Path, key: str, body: str) -> None:
    """Write `body` as the section `key` of the markdown file at `path` (created if missing)."""
    begin, end = _markers(key)
    section = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + section + "\n"
    path.write_text(text, encoding="utf-8")


def read_section(path: Path, key: str) -> str | None:
    """The body of section `key`, or None when the file or the section does not exist."""
    if not path.exists():
        return None
    begin, end = _markers(key)
    match = re.search(re.escape(begin) + r"\n(.*?)\n" + re.escape(end), path.read_text(encoding="utf-8"), re.DOTALL)
    return match.group(1) if match else None


def sections(path: Path) -> dict[str, str]:
    """Every section of the file, key -> body, in file order (empty when the file does not exist)."""
    if not path.exists():
        return {}
    found = re.finditer(r"<!-- bench:(.*?) -->\n(.*?)\n<!-- /bench:\1 -->", path.read_text(encoding="utf-8"), re.DOTALL)
    return {match.group(1): match.group(2) for match in found}
