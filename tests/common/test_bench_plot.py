"""The benchmarks' plots: well-formed SVG whose points sit where their table's figures put them, drawn from the
tables the benchmarks write, and the plots in docs/ up to date with the tables in docs/benchmarks.md."""

from __future__ import annotations

import math
from pathlib import Path
from xml.etree import ElementTree

import pytest

from app.bench.plots import BREAKING_POINT_SWEEP, PLOTS, SERVING_SWEEP
from app.bench.report import format_table
from common.bench.plot import Point, Series, nice_ticks, render_svg
from common.bench.results_file import update_section
from common.bench.sweep_plot import sweep_series, write_sweep_plot
from llm_bench.plots import LLM_SWEEP
from llm_bench.report import table

SVG = "{http://www.w3.org/2000/svg}"
DOCS = Path(__file__).resolve().parents[2] / "docs"
LLM_HEADER = ["concurrency", "completed", "failed", "TTFT p50 (ms)", "output tok/s"]


def circles(svg: str) -> list[ElementTree.Element]:
    """The points of a rendered plot, after parsing it as XML (a malformed document raises)."""
    root = ElementTree.fromstring(svg)  # noqa: S314  # our own output, not untrusted input
    assert root.tag == f"{SVG}svg"
    return root.findall(f".//{SVG}circle")


def assert_affine(pairs: list[tuple[float, float]], *, increasing: bool) -> None:
    """The screen coordinates are one affine function of the data (fitted on the extremes), rising or falling."""
    (d0, s0), (d1, s1) = min(pairs), max(pairs)
    slope = (s1 - s0) / (d1 - d0)
    assert (slope > 0) == increasing
    for data, screen in pairs:
        assert math.isclose(screen, s0 + slope * (data - d0), abs_tol=0.15)


def test_points_sit_where_the_data_puts_them():
    lines = [
        Series("gateway <&>", (Point(50, 600, "1"), Point(1_000, 880, "2"), Point(1_200, 1_060, "4"))),
        Series("direct", (Point(40, 620, "1"), Point(300, 1_400, "8"))),
    ]
    svg = render_svg(lines, title="t & u", x_label="TTFT p50 (ms)", y_label="output tokens/s")
    points = circles(svg)
    assert [(float(c.get("data-x")), float(c.get("data-y"))) for c in points] == [
        (p.x, p.y) for line in lines for p in line.points
    ]
    assert [c.get("data-label") for c in points] == ["1", "2", "4", "1", "8"]
    assert_affine([(float(c.get("data-x")), float(c.get("cx"))) for c in points], increasing=True)
    assert_affine([(float(c.get("data-y")), float(c.get("cy"))) for c in points], increasing=False)
    root = ElementTree.fromstring(svg)  # noqa: S314  # our own output
    groups = root.findall(f"{SVG}g")
    assert [g.get("data-name") for g in groups] == ["gateway <&>", "direct"]
    # Each line's polyline joins its own points in sweep order.
    for group in groups:
        (polyline,) = group.findall(f"{SVG}polyline")
        joined = [tuple(map(float, xy.split(","))) for xy in polyline.get("points").split()]
        assert joined == [(float(c.get("cx")), float(c.get("cy"))) for c in group.findall(f"{SVG}circle")]


def test_the_axes_start_at_zero_and_cover_every_point():
    assert nice_ticks(0, 2_310.95) == [0, 500, 1_000, 1_500, 2_000, 2_500]
    assert nice_ticks(0, 7.3) == [0, 2, 4, 6, 8]
    assert nice_ticks(0, 0) == [0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]


@pytest.mark.parametrize(
    ("lines", "message"),
    [([], "nothing to plot"), ([Series("a", (Point(math.nan, 1, "1"),))], "finite")],
)
def test_nothing_or_nan_to_plot_is_refused(lines, message):
    with pytest.raises(ValueError, match=message):
        render_svg(lines, title="t", x_label="x", y_label="y")


def test_one_line_per_section_from_the_tables_the_benchmarks_write(tmp_path):
    results = tmp_path / "benchmarks.md"
    update_section(
        results,
        "llm a 3072/512",
        "### a\n\n" + table(LLM_HEADER, [[1, 16, 0, 57.98, 597.59], [2, 16, 0, 1_063.53, 882.23]]),
    )
    update_section(results, "llm overhead", "### no sweep here\n\n" + table(["streams", "x"], [[1, 2.0]]))
    update_section(
        results, "llm b 1024/128", table(LLM_HEADER, [[4, 16, 0, math.nan, 1.0], [8, 16, 0, 75.28, 1_304.88]])
    )
    serving = [["bare pipeline, batch 1", 167.0, 6.22], ["HTTP, 1 client(s)", 171.0, 6.02]]
    serving.append(["HTTP, 16 client(s)", 2_172.0, 7.21])
    update_section(results, "serving cpu m 128x128 10", format_table(["mode", "p50 ms", "images/s"], serving))
    llm = sweep_series(results, LLM_SWEEP)
    assert [line.name for line in llm] == ["a 3072/512", "b 1024/128"]  # the section without a sweep: no line
    assert llm[0].points == (Point(57.98, 597.59, "1"), Point(1_063.53, 882.23, "2"))
    assert llm[1].points == (Point(75.28, 1_304.88, "8"),)  # a point without a figure ("n/a") is left out
    (image,) = sweep_series(results, SERVING_SWEEP)
    assert image.points == (Point(171.0, 6.02, "1"), Point(2_172.0, 7.21, "16"))  # the bare rows are no sweep
    assert sweep_series(results, BREAKING_POINT_SWEEP) == []
    assert write_sweep_plot(results, BREAKING_POINT_SWEEP) is None
    path = write_sweep_plot(results, LLM_SWEEP)
    assert path == tmp_path / "benchmarks-llm-sweep.svg" and len(circles(path.read_text())) == 3


@pytest.mark.parametrize("plot", [LLM_SWEEP, *PLOTS], ids=lambda plot: plot.name)
def test_the_docs_plots_show_the_docs_tables(plot, tmp_path):
    """docs/benchmarks.md embeds each plot, and each is what its tables draw today (else: python -m llm_bench.plots
    docs/benchmarks.md, python -m app.bench.plots docs/benchmarks.md)."""
    committed = plot.path_beside(DOCS / "benchmarks.md")
    assert f"]({committed.name})" in (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    copy = tmp_path / "benchmarks.md"
    copy.write_text((DOCS / "benchmarks.md").read_text(encoding="utf-8"), encoding="utf-8")
    drawn = write_sweep_plot(copy, plot)
    assert drawn is not None and drawn.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")
