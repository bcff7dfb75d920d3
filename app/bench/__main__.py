"""`python -m app.bench [mode] [options]`: run one benchmark mode and print its table.

Each mode is a module with `add_arguments(parser)` and `run(args) -> int`; `serving` is the default.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from app.bench import breaking_point, gpu, jobs, pipeline, serving

MODES: dict[str, ModuleType] = {
    "serving": serving,
    "pipeline": pipeline,
    "breaking-point": breaking_point,
    "jobs": jobs,
    "gpu": gpu,
}
DEFAULT_MODE = "serving"


def build_parser() -> argparse.ArgumentParser:
    """One sub-command per registered mode."""
    parser = argparse.ArgumentParser(prog="python -m app.bench", description=__doc__)
    modes = parser.add_subparsers(dest="mode", metavar="MODE")
    for name, module in MODES.items():
        sub = modes.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (the default mode when none is named) and run the mode."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in MODES and argv[0] not in ("-h", "--help")):
        argv.insert(0, DEFAULT_MODE)
    args = build_parser().parse_args(argv)
    return MODES[args.mode].run(args)


if __name__ == "__main__":
    sys.exit(main())
