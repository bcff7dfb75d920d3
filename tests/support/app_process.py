"""`python -m app` as a real process on a free loopback port, for tests of what only a process shows
(signals, stderr, another interpreter): started, waited for until ready, killed if still running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen[Any], timeout_s: float = 300, log: Path | None = None) -> None:
    """Poll /readiness until 200; fail at once if the process exits, or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    tail = (lambda: log.read_text()[-4000:]) if log is not None else (lambda: "")
    while True:
        assert process.poll() is None, f"the service exited ({process.returncode})\n{tail()}"
        assert time.monotonic() < deadline, f"not ready within {timeout_s} s\n{tail()}"
        try:
            if httpx.get(f"{url}/readiness", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)


@contextmanager
def run_app(
    env: Mapping[str, str],
    *,
    python: str = sys.executable,
    output: IO[str] | int = subprocess.PIPE,
    ready_timeout_s: float = 300,
    log: Path | None = None,
    wrapper: Sequence[str] = (),
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start `python -m app` on the CPU with `env` (MODEL_CACHE_DIR among it) on a free port; yield
    (process, url) once ready. stdout and stderr go to `output` (pipes by default: read them with
    `process.communicate()` after the block). `wrapper` runs it under another command (bwrap, say)."""
    port = free_port()
    full_env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "BACKEND": "cpu", "DEFAULT_STEPS": "2", **env}
    stderr = subprocess.STDOUT if output is not subprocess.PIPE else subprocess.PIPE
    command = [*wrapper, python, "-m", "app"]
    process = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=output, stderr=stderr, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, ready_timeout_s, log)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
