"""The local LLM stack as real processes for the tests: `python -m llm_local` (make run-llm: vLLM's CPU
engine and the gateway, once per session) and extra gateways (`python -m llm_gateway`, one per test that
needs its own settings), each on free loopback ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.app_process import ROOT, free_port

GATEWAY_READY_TIMEOUT_S = 60
ENGINE_READY_TIMEOUT_S = 900  # two shared cores: the engine's start is measured in tens of seconds, often more


@dataclass
class GatewayProcess:
    """A running gateway: its process, URL and log file (JSON lines)."""

    process: subprocess.Popen[str]
    url: str
    log: Path

    def records(self) -> list[dict[str, Any]]:
        """The per-request records the gateway logged so far."""
        records = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            if '"event": "llm_request"' in line:  # the log may hold vLLM's own lines too (python -m llm_local)
                records.append(json.loads(line))
        return records

    def wait_record(self, count: int, timeout_s: float = 30) -> list[dict[str, Any]]:
        """The records once there are at least `count` (a record is written when its request ends)."""
        deadline = time.monotonic() + timeout_s
        while len(records := self.records()) < count:
            assert time.monotonic() < deadline, f"{len(records)} request records, expected {count}:\n{self.tail()}"
            time.sleep(0.1)
        return records

    def tail(self) -> str:
        """The end of the gateway's log, for failure messages."""
        return self.log.read_text(encoding="utf-8")[-4000:]

    def terminate(self) -> None:
        """SIGTERM, as Kubernetes stops a pod."""
        self.process.send_signal(signal.SIGTERM)


@contextmanager
def run_gateway(upstream_url: str, log_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[GatewayProcess]:
    """`python -m llm_gateway` in front of `upstream_url` on a free port; yielded once /health answers."""
    port = free_port()
    log = log_dir / f"gateway-{port}.log"
    full_env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "UPSTREAM_URL": upstream_url,
        "AUTH": "off",
        **(env or {}),
    }
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llm_gateway"],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    gateway = GatewayProcess(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + GATEWAY_READY_TIMEOUT_S
        while True:
            assert process.poll() is None, f"the gateway exited ({process.returncode})\n{gateway.tail()}"
            assert time.monotonic() < deadline, f"the gateway did not answer\n{gateway.tail()}"
            try:
                if httpx.get(f"{gateway.url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield gateway
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@dataclass
class LocalStack:
    """`python -m llm_local` running: its gateway (the launcher process) and its engine's URL."""

    gateway: GatewayProcess
    engine_url: str


@contextmanager
def run_local_stack(log_dir: Path) -> Iterator[LocalStack]:
    """`python -m llm_local` with HOST/PORT/ENGINE_PORT on free loopback ports; yielded once the gateway is
    ready (the engine answers). On exit: SIGTERM, then the launcher must exit cleanly, take the engine along and
    leave no leak report in the log."""
    port, engine_port = free_port(), free_port()
    log = log_dir / "llm-local.log"
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "ENGINE_PORT": str(engine_port)}
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llm_local"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    stack = LocalStack(GatewayProcess(process, f"http://127.0.0.1:{port}", log), f"http://127.0.0.1:{engine_port}")
    try:
        deadline = time.monotonic() + ENGINE_READY_TIMEOUT_S
        while not _answers(f"{stack.gateway.url}/readiness"):
            assert process.poll() is None, f"python -m llm_local exited ({process.returncode})\n{stack.gateway.tail()}"
            assert time.monotonic() < deadline, f"the local stack was not ready\n{stack.gateway.tail()}"
            time.sleep(0.5)
        yield stack
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, stack.gateway.tail()
        assert not _answers(f"{stack.engine_url}/health"), "the engine outlived python -m llm_local"
        # A clean stop ends without the interpreter-exit noise of triton's bindings (llm_local/engine_entry.py).
        assert "nanobind: leaked" not in log.read_text(encoding="utf-8"), stack.gateway.tail()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def engine_metric(engine_url: str, name: str, label: str = "") -> float:
    """The sum of one of vLLM's Prometheus series (e.g. vllm:num_requests_running) over the samples whose
    labels contain `label` (e.g. 'finished_reason="abort"')."""
    text = httpx.get(f"{engine_url}/metrics", timeout=10).text
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ") and label in line
    ]
    assert values, f"vLLM publishes no {name}"
    return sum(values)


def wait_until(predicate: Any, timeout_s: float, what: str) -> float:
    """Poll `predicate` until true; return the seconds it took, or fail naming `what`."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s: {what}"
        time.sleep(0.1)
    return time.monotonic() - started
