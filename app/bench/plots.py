"""The image benchmark's plots: throughput against latency over each section's concurrency sweep, one line per
measured target, written beside the results file: `serving` (images/s against p50 over its HTTP client counts) and
`breaking-point` (requests/min against p50 over its client ramp).

    python -m app.bench.plots docs/benchmarks.md     # redraw from the tables already there
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.bench.sweep_plot import SweepPlot, write_sweep_plot

# The columns of the tables app/bench/serving.py and app/bench/breaking_point.py write.
SERVING_SWEEP = SweepPlot(
    name="image-serving",
    key_prefix="serving ",
    concurrency_column="mode",
    concurrency=r"HTTP, (\d+) client\(s\)",
    x_column="p50 ms",
    y_column="images/s",
    title="Image serving: throughput against latency (points: concurrent clients)",
    x_label="latency p50 (ms)",
    y_label="images/s",
)
BREAKING_POINT_SWEEP = SweepPlot(
    name="image-breaking-point",
    key_prefix="breaking-point ",
    concurrency_column="clients",
    concurrency=r"(\d+)",
    x_column="p50 ms",
    y_column="req/min",
    title="Image service breaking point: requests/min against latency (points: concurrent clients)",
    x_label="latency p50 (ms)",
    y_label="requests/min",
)
PLOTS = (SERVING_SWEEP, BREAKING_POINT_SWEEP)


def write_plots(results_file: Path) -> list[Path]:
    """Redraw every image plot that `results_file` has a sweep for; the files written."""
    return [path for plot in PLOTS if (path := write_sweep_plot(results_file, plot)) is not None]


def main(argv: list[str] | None = None) -> int:
    """Redraw the plots of a results file."""
    parser = argparse.ArgumentParser(prog="python -m app.bench.plots", description=__doc__.splitlines()[0])
    parser.add_argument("results_file", type=Path)
    args = parser.parse_args(argv)
    written = write_plots(args.results_file)
    if not written:
        print(f"error: {args.results_file} has no image sweep to plot", file=sys.stderr)
        return 1
    for path in written:
        print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
