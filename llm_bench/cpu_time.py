"""A process's CPU time, for the gateway's CPU per token in the benchmark's overhead part (--local)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_times(pid: int) -> tuple[float, float]:
    """CPU time process `pid` has used so far in user and in system (kernel) mode, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process `pid` has used so far."""
    return sum(cpu_times(pid))
