"""What the benchmark ran on, for its results: the CPU and how busy the machine was."""

from __future__ import annotations

import os


def cpu_name() -> str:
    """This machine's CPU model and thread count."""
    name = "CPU"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name}, {os.cpu_count()} threads"


def load_average() -> str:
    """The 1-minute load average (the machine is shared: figures are only as steady as this)."""
    return f"{os.getloadavg()[0]:.2f}"
