"""A line plot as SVG, written by hand: throughput against latency over a concurrency sweep, one line per target.

No plotting library: the benchmarks' images carry few points, and SVG is text that a markdown page embeds and a
reviewer can diff. Each point is a `<circle>` with its data in `data-x`, `data-y` and `data-label` attributes and a
`<title>` (the tooltip), so a test, or a reader of the source, can check the picture against the table it came from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

WIDTH, HEIGHT = 720, 420
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 72, 24, 40, 56
LEGEND_LINE = 18  # the height of one legend entry
# Colour-blind-safe (Okabe and Ito's palette), in order of use.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
TICKS = 5


@dataclass(frozen=True)
class Point:
    """One measured point: its position and what it is (the concurrency, say)."""

    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Series:
    """One target's line: its name and its points in sweep order."""

    name: str
    points: tuple[Point, ...]


def nice_ticks(low: float, high: float, count: int = TICKS) -> list[float]:
    """About `count` round tick values (steps of 1, 2 or 5 x 10^n) from at or below `low` to at or above `high`."""
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"axis bounds must be finite, not {low}..{high}")
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks = [first]
    while ticks[-1] < high - step * 1e-9:
        ticks.append(first + step * len(ticks))
    return ticks


def _format(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}"


def render_svg(series: Sequence[Series], *, title: str, x_label: str, y_label: str) -> str:
    """The SVG document of `series` (each with at least one point) on shared axes from 0, with a legend."""
    points = [p for s in series for p in s.points]
    if not points:
        raise ValueError("nothing to plot: no series has a point")
    bad = [p for p in points if not (math.isfinite(p.x) and math.isfinite(p.y))]
    if bad:
        raise ValueError(f"points must be finite numbers: {bad}")
    x_ticks = nice_ticks(min(0.0, *(p.x for p in points)), max(p.x for p in points))
    y_ticks = nice_ticks(min(0.0, *(p.y for p in points)), max(p.y for p in points))
    legend_height = LEGEND_LINE * len(series)
    plot_left, plot_right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    plot_top, plot_bottom = MARGIN_TOP + legend_height, HEIGHT + legend_height - MARGIN_BOTTOM

    def sx(x: float) -> float:
        return plot_left + (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * (plot_right - plot_left)

    def sy(y: float) -> float:
        return plot_bottom - (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * (plot_bottom - plot_top)

    total_height = HEIGHT + legend_height
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total_height}" '
        f'viewBox="0 0 {WIDTH} {total_height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{total_height}" fill="#ffffff"/>',
        f'<text x="{WIDTH / 2:.1f}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for tick in x_ticks:
        x = sx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{plot_bottom}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{_format(tick)}</text>')
    for tick in y_ticks:
        y = sy(tick)
        out.append(f'<line x1="{plot_left}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{plot_left - 6}" y="{y + 4:.1f}" text-anchor="end">{_format(tick)}</text>')
    out.append(
        f'<rect x="{plot_left}" y="{plot_top}" width="{plot_right - plot_left}" height="{plot_bottom - plot_top}" '
        'fill="none" stroke="#404040"/>'
    )
    out.append(
        f'<text x="{(plot_left + plot_right) / 2:.1f}" y="{total_height - 14}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    middle = (plot_top + plot_bottom) / 2
    out.append(
        f'<text x="16" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 16 {middle:.1f})">'
        f"{escape(y_label)}</text>"
    )
    for index, line in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        legend_y = MARGIN_TOP + LEGEND_LINE * index
        out.append(f'<g class="series" data-name={quoteattr(line.name)}>')
        out.append(
            f'<line x1="{plot_left}" y1="{legend_y - 4}" x2="{plot_left + 24}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{plot_left + 30}" y="{legend_y}">{escape(line.name)}</text>')
        coordinates = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in line.points)
        out.append(f'<polyline points="{coordinates}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for p in line.points:
            out.append(
                f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="4" fill="{colour}" data-x="{p.x!r}" '
                f'data-y="{p.y!r}" data-label={quoteattr(p.label)}><title>{escape(line.name)}: {escape(p.label)}, '
                f"{escape(x_label)} {_format(p.x)}, {escape(y_label)} {_format(p.y)}</title></circle>"
            )
            out.append(
                f'<text x="{sx(p.x) + 6:.1f}" y="{sy(p.y) - 6:.1f}" font-size="10" fill="{colour}">'
                f"{escape(p.label)}</text>"
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
