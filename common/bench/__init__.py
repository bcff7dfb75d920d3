"""What the benchmarks share: the results file they write their tables into, and the cost arithmetic."""
