"""Benchmarks: `python -m app.bench <mode>` prints a table that can be rerun and compared."""
