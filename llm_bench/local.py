"""The local stack for the benchmark (make bench-llm --local): `python -m llm_local` (make run-llm) on free
loopback ports, through the repository's server starter (common/server_process.py). Local only: the gateway
image, which runs llm_bench as the cluster's benchmark Job, holds neither llm_local nor tools."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.server_process import free_port, serve_process

READY_TIMEOUT_S = 900


@contextmanager
def local_stack(log: Path, engine_threads: int | None = None) -> Iterator[tuple[str, str, int]]:
    """Start `python -m llm_local`; yield (engine URL, gateway URL, the gateway's process id) once ready
    (the engine runs in a child process of its own); SIGTERM it at the end.
    `engine_threads` sets OMP_NUM_THREADS, the CPU engine's thread count (its default: every core)."""
    engine_port = free_port()
    env = {"ENGINE_PORT": str(engine_port)}
    if engine_threads is not None:
        env["OMP_NUM_THREADS"] = str(engine_threads)
    with serve_process(
        [sys.executable, "-m", "llm_local"], env=env, log=log, ready_path="/readiness", ready_timeout_s=READY_TIMEOUT_S
    ) as stack:
        yield f"http://127.0.0.1:{engine_port}", stack.url, stack.process.pid
