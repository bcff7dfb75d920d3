"""The plot beside a benchmark's tables: the concurrency sweeps of a results file, one line per section.

A benchmark writes each measured target as a section of its results file (common/bench/results_file.py), with its
sweep as a markdown table. This reads those tables back, so the plot always shows what the tables say, and a plot
of several targets needs no rerun: every section whose key starts with the benchmark's prefix and whose tables hold
the sweep's columns is one line, throughput (y) against latency (x), each point labelled with its concurrency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from common.bench.plot import Point, Series, render_svg
from common.bench.results_file import sections


@dataclass(frozen=True)
class SweepPlot:
    """Which sections and columns one benchmark's plot is drawn from, and its file's name beside the results."""

    name: str  # the plot file is <results stem>-<name>.svg
    key_prefix: str  # the sections whose key starts with it
    concurrency_column: str
    concurrency: str  # a regex on that column's cell whose first group is the concurrency; other rows are skipped
    x_column: str  # latency
    y_column: str  # throughput
    title: str
    x_label: str
    y_label: str

    def path_beside(self, results_file: Path) -> Path:
        """Where the plot of `results_file` goes."""
        return results_file.with_name(f"{results_file.stem}-{self.name}.svg")


def parse_number(cell: str) -> float | None:
    """A table cell as a number ("1,064.34" -> 1064.34); None for "n/a" or text."""
    try:
        return float(cell.replace(",", "").strip())
    except ValueError:
        return None


def markdown_tables(body: str) -> list[list[list[str]]]:
    """The markdown tables in `body`: each a list of rows of stripped cells, header first, the rule row left out."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*body.splitlines(), ""]:
        if line.strip().startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def section_series(name: str, body: str, plot: SweepPlot) -> Series | None:
    """The sweep of one section as a line, or None when the section has no table with the plot's columns."""
    pattern = re.compile(plot.concurrency)
    for rows in markdown_tables(body):
        header = rows[0]
        if not {plot.concurrency_column, plot.x_column, plot.y_column} <= set(header):
            continue
        at = {column: header.index(column) for column in (plot.concurrency_column, plot.x_column, plot.y_column)}
        points = []
        for row in rows[1:]:
            match = pattern.fullmatch(row[at[plot.concurrency_column]])
            x, y = parse_number(row[at[plot.x_column]]), parse_number(row[at[plot.y_column]])
            if match and x is not None and y is not None:
                points.append(Point(x, y, match.group(1)))
        if points:
            return Series(name, tuple(points))
    return None


def sweep_series(results_file: Path, plot: SweepPlot) -> list[Series]:
    """One line per section of `results_file` that `plot` draws, named by the section's key after the prefix (keys
    are unique, where two runs' headings can be the same)."""
    lines = []
    for key, body in sections(results_file).items():
        if not key.startswith(plot.key_prefix):
            continue
        line = section_series(key[len(plot.key_prefix) :], body, plot)
        if line is not None:
            lines.append(line)
    return lines


def write_sweep_plot(results_file: Path, plot: SweepPlot) -> Path | None:
    """Draw `plot` from `results_file` into its file beside it; the path, or None when no section has a sweep."""
    lines = sweep_series(results_file, plot)
    if not lines:
        return None
    path = plot.path_beside(results_file)
    path.write_text(render_svg(lines, title=plot.title, x_label=plot.x_label, y_label=plot.y_label), encoding="utf-8")
    return path
