"""The local LLM stack as real processes for the tests: `python -m llm_local` (make run-llm: vLLM's CPU
engine and the gateway, once per session) and extra gateways (`python -m llm_gateway`, one per test that
needs its own settings), each on free loopback ports; and the pace stand-in engine (llm_bench/standin_engine.py)
in a thread."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.server_process import ServerProcess, free_port, serve_process
from llm_bench.standin_engine import Pace, StandinEngine
from llm_gateway.gateway import FINISHED_WRITE_DELAY_S
from llm_local.engine import engine_client

GATEWAY_READY_TIMEOUT_S = 60
FULL_SPEED = Pace(ttft_s=0.0, gap_s=0.0)
ENGINE_READY_TIMEOUT_S = 900  # two shared cores: the engine's start is measured in tens of seconds, often more


@dataclass
class GatewayProcess(ServerProcess):
    """A running gateway: its process, URL and log file (JSON lines)."""

    log: Path

    def records(self) -> list[dict[str, Any]]:
        """The per-request records the gateway logged so far (of the requests that ended before this call: a
        request's record is written FINISHED_WRITE_DELAY_S after it ends, which this waits out first)."""
        time.sleep(2 * FINISHED_WRITE_DELAY_S)
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


@contextmanager
def run_gateway(upstream_url: str, log_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[GatewayProcess]:
    """`python -m llm_gateway` in front of `upstream_url` on a free port; yielded once /health answers."""
    port = free_port()
    log = log_dir / f"gateway-{port}.log"
    settings = {"UPSTREAM_URL": upstream_url, "AUTH": "off", **(env or {})}
    with serve_process(
        [sys.executable, "-m", "llm_gateway"],
        env=settings,
        log=log,
        port=port,
        ready_timeout_s=GATEWAY_READY_TIMEOUT_S,
        stop_grace_s=30,
    ) as server:
        yield GatewayProcess(server.process, server.url, log)


@dataclass
class LocalStack:
    """`python -m llm_local` running: its gateway (the launcher process) and its engine's URL (unix:/path: the
    engine listens on a Unix socket, as on the pods; `engine_client` calls it)."""

    gateway: GatewayProcess
    engine_url: str


@contextmanager
def run_local_stack(log_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[LocalStack]:
    """`python -m llm_local` with HOST/PORT on free loopback ports and the engine on a Unix socket in a private folder
    (ENGINE_SOCKET, vLLM's --uds as on the pods), and `env` (such as ENGINE_TASK=embed); yielded once the gateway is
    ready (the engine answers). On exit: SIGTERM, then the launcher must exit cleanly, take the engine along and
    leave no leak report in the log."""
    log = log_dir / "llm-local.log"
    # Not under `log_dir`: pytest's folders can make a path longer than a Unix socket's 107 bytes.
    with tempfile.TemporaryDirectory(prefix="llm-engine-") as folder:
        engine_socket = f"{folder}/vllm.sock"
        with serve_process(
            [sys.executable, "-m", "llm_local"],
            env={"ENGINE_SOCKET": engine_socket, **(env or {})},
            log=log,
            ready_path="/readiness",
            ready_timeout_s=ENGINE_READY_TIMEOUT_S,
        ) as server:
            stack = LocalStack(GatewayProcess(server.process, server.url, log), f"unix:{engine_socket}")
            yield stack
            assert stack.gateway.stop() == 0, stack.gateway.tail()
            with engine_client(stack.engine_url) as engine, suppress(httpx.TransportError):
                pytest.fail(f"the engine outlived python -m llm_local: /health {engine.get('/health').status_code}")
            # A clean stop ends without the interpreter-exit noise of triton's bindings (llm_local/engine_entry.py).
            assert "nanobind: leaked" not in log.read_text(encoding="utf-8"), stack.gateway.tail()


def engine_metric(engine_url: str, name: str, label: str = "") -> float:
    """The sum of one of vLLM's Prometheus series (e.g. vllm:num_requests_running) over the samples whose
    labels contain `label` (e.g. 'finished_reason="abort"')."""
    with engine_client(engine_url) as engine:
        text = engine.get("/metrics", timeout=10).text
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


@contextmanager
def run_standin(
    *, record: bool = False, pace: Pace = FULL_SPEED, uds: str | None = None
) -> Iterator[tuple[str, StandinEngine]]:
    """The pace stand-in engine (llm_bench/standin_engine.py; default: full speed) on a free port, and with `uds` on
    that Unix socket path too, in a thread of its own; (URL, engine). With `record`, the engine keeps the prompts it
    gets."""
    engine = StandinEngine(pace, record=record)
    port = free_port()
    loop = asyncio.new_event_loop()
    started = asyncio.Event()
    task = loop.create_task(engine.serve("127.0.0.1", port, started, uds=uds))

    def run() -> None:
        with suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
        # Connections a client still holds (a gateway that outlives the engine) end here, not in a closed loop.
        left = asyncio.all_tasks(loop)
        for connection in left:
            connection.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(started.wait(), 10), loop).result(timeout=15)
        yield f"http://127.0.0.1:{port}", engine
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=10)
        loop.close()
