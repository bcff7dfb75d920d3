"""A program that serves HTTP, run on a free loopback port: started with HOST/PORT, waited for until a path
answers 200, stopped with SIGTERM (SIGKILL after a grace), and the end of its log in every start failure.

The one way the repository starts its servers as processes: `make bench-llm`'s local stack (llm_bench/local.py)
and the tests' (tests/support/app_process.py, tests/llm/stack.py); the in-process test server
(tests/app/live_server.py) waits through `wait_until_answers` too.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
TAIL_CHARS = 4000


class ServerFailed(RuntimeError):
    """The program exited, or did not answer in time; the message ends with the end of its log."""


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def answers(url: str, timeout_s: float = 5.0) -> bool:
    """Whether `url` answers 200 now."""
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.TransportError:
        return False


def wait_until_answers(
    url: str, *, timeout_s: float, gone: Callable[[], str | None], tail: Callable[[], str] = str, poll_s: float = 0.2
) -> float:
    """Poll `url` until it answers 200; return the seconds it took. Raise ServerFailed as soon as `gone()` says
    why the server cannot answer any more (it exited, its model failed to load), or after `timeout_s`."""
    started = time.monotonic()
    while not answers(url):
        reason = gone()
        if reason is None and time.monotonic() - started > timeout_s:
            reason = f"{url} did not answer within {timeout_s:g} s"
        if reason is not None:
            raise ServerFailed(f"{reason}\n--- its log (end) ---\n{tail()}")
        time.sleep(poll_s)
    return time.monotonic() - started


@dataclass
class ServerProcess:
    """A running server: its process, base URL and log file (None: its output goes to pipes the caller reads,
    with `process.communicate()`, once it has stopped)."""

    process: subprocess.Popen[str]
    url: str
    log: Path | None

    def tail(self) -> str:
        """The end of the server's log (empty while its output goes to pipes)."""
        if self.log is None or not self.log.is_file():
            return ""
        return self.log.read_text(encoding="utf-8", errors="replace")[-TAIL_CHARS:]

    def terminate(self) -> None:
        """SIGTERM, as Kubernetes stops a pod and Ctrl-C's neighbour stops a local run."""
        self.process.send_signal(signal.SIGTERM)

    def stop(self, grace_s: float = 60.0) -> int:
        """SIGTERM, then SIGKILL if it is still running after `grace_s`; its exit status."""
        if self.process.poll() is None:
            self.terminate()
            try:
                return self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


@contextmanager
def serve_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    ready_path: str = "/health",
    ready_timeout_s: float = 300.0,
    port: int | None = None,
    cwd: Path = REPO_ROOT,
    stop_grace_s: float = 60.0,
) -> Iterator[ServerProcess]:
    """Run `argv` with this environment plus HOST=127.0.0.1, PORT=<a free port> and `env`; yield it once
    `ready_path` answers 200; stop it at the end (SIGTERM, SIGKILL after `stop_grace_s`). Output goes to `log`
    (created), or to pipes when `log` is None. A start failure raises ServerFailed with the log's end; a failure
    inside the block prints the log's end to stderr before it propagates."""
    port = port or free_port()
    full_env = {**os.environ, "HOST": LOOPBACK, "PORT": str(port), **(env or {})}
    with ExitStack() as files:
        out = files.enter_context(log.open("w", encoding="utf-8")) if log is not None else subprocess.PIPE
        err = subprocess.STDOUT if log is not None else subprocess.PIPE
        process = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=out, stderr=err, text=True)
    server = ServerProcess(process, f"http://{LOOPBACK}:{port}", log)
    command = shlex.join(argv)

    def exited() -> str | None:
        return None if process.poll() is None else f"{command} exited ({process.returncode})"

    def start_log() -> str:
        if log is not None:
            return server.tail()
        server.stop(grace_s=5)  # it failed: its pipes can be drained now
        stdout, stderr = process.communicate()
        return ((stdout or "") + (stderr or ""))[-TAIL_CHARS:]

    try:
        wait_until_answers(f"{server.url}{ready_path}", timeout_s=ready_timeout_s, gone=exited, tail=start_log)
        try:
            yield server
        except Exception:
            if log is not None:
                print(f"--- {command} (end of {log}) ---\n{server.tail()}", file=sys.stderr)
            raise
    finally:
        server.stop(stop_grace_s)
