"""The LLM benchmark's plot: output tokens/s against TTFT p50 over each section's concurrency sweep, one line per
measured target (a `llm ...` section of the results file), written beside the results file.

    python -m llm_bench.plots docs/benchmarks.md     # redraw from the tables already there
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.bench.sweep_plot import SweepPlot, write_sweep_plot

# The columns of the sweep table llm_bench/__main__.py writes.
LLM_SWEEP = SweepPlot(
    name="llm-sweep",
    key_prefix="llm ",
    concurrency_column="concurrency",
    concurrency=r"(\d+)",
    x_column="TTFT p50 (ms)",
    y_column="output tok/s",
    title="LLM serving: throughput against time to first token (points: concurrency)",
    x_label="TTFT p50 (ms)",
    y_label="output tokens/s",
)


def main(argv: list[str] | None = None) -> int:
    """Redraw the plot of a results file."""
    parser = argparse.ArgumentParser(prog="python -m llm_bench.plots", description=__doc__.splitlines()[0])
    parser.add_argument("results_file", type=Path)
    args = parser.parse_args(argv)
    path = write_sweep_plot(args.results_file, LLM_SWEEP)
    if path is None:
        print(f"error: {args.results_file} has no LLM sweep to plot", file=sys.stderr)
        return 1
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
