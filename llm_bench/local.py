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


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_stack(log: Path) -> Iterator[tuple[str, str]]:
    """Start `python -m llm_local`; yield (engine URL, gateway URL) once ready; SIGTERM it at the end."""
    port, engine_port = free_port(), free_port()
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "ENGINE_PORT": str(engine_port)}
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
        yield f"http://127.0.0.1:{engine_port}", gateway
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
