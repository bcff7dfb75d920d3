"""Shared pieces of every benchmark mode: percentiles and a plain-text table."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table (readable in a terminal and pasteable into docs)."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return "n/a" if math.isnan(value) else f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(headers)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("| " + " | ".join("-" * w for w in widths) + " |")
    out += ["| " + " | ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) + " |" for line in lines]
    return "\n".join(out)
