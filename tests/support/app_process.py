"""`python -m app` as a real process on a free loopback port, for tests of what only a process shows
(signals, stderr, another interpreter): started through common/server_process.py, yielded once ready."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from common.server_process import serve_process


@contextmanager
def run_app(
    env: Mapping[str, str],
    *,
    python: str = sys.executable,
    ready_timeout_s: float = 300,
    log: Path | None = None,
    wrapper: Sequence[str] = (),
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start `python -m app` on the CPU with `env` (MODEL_CACHE_DIR among it) on a free port; yield
    (process, url) once /readiness answers. Its output goes to `log`, or to pipes when there is none (read them
    with `process.communicate()` after the block, having stopped it: a pipe nobody reads blocks a chatty server).
    `wrapper` runs it under another command (bwrap, say). Stopped with SIGTERM at the end if still running."""
    defaults = {"BACKEND": "cpu", "DEFAULT_STEPS": "2"}
    with serve_process(
        [*wrapper, python, "-m", "app"],
        env={**defaults, **env},
        log=log,
        ready_path="/readiness",
        ready_timeout_s=ready_timeout_s,
        stop_grace_s=30,
    ) as server:
        yield server.process, server.url
