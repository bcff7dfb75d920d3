"""The local stack for the benchmark: `python -m llm_local` (make run-llm) on free loopback ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

READY_TIMEOUT_S = 900
ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process `pid` has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_stack(log: Path, engine_threads: int | None = None) -> Iterator[tuple[str, str, int]]:
    """Start `python -m llm_local`; yield (engine URL, gateway URL, the gateway's process id) once ready
    (the engine runs in a child process of its own); SIGTERM it at the end.
    `engine_threads` sets OMP_NUM_THREADS, the CPU engine's thread count (its default: every core)."""
    port, engine_port = free_port(), free_port()
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "ENGINE_PORT": str(engine_port)}
    if engine_threads is not None:
        env["OMP_NUM_THREADS"] = str(engine_threads)
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llm_local"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    gateway = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"python -m llm_local exited ({process.returncode}); see {log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local stack was not ready within {READY_TIMEOUT_S} s; see {log}")
            try:
                if httpx.get(f"{gateway}/readiness", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        yield f"http://127.0.0.1:{engine_port}", gateway, process.pid
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
