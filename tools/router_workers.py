"""The workers `python -m tools.router_policies` puts vLLM's router in front of: a gateway (`python -m llm_gateway`,
its pod's settings, RENDER_ROUTES on as the synth sets it for cache_aware) in front of each engine, the engines
either pace stand-ins (llm_bench/standin_engine.py, in a thread of this process) or vLLM's CPU engines with
`make run-llm`'s tiny model (llm_local/engine.py, each on its own Unix socket, as on a pod). What each worker can
tell about a run: the requests it served (its gateway's per-request records, by the client's X-Request-Id), the
render calls its engine answered, and, for vLLM, its engine's prefix-cache counters.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from common.server_process import free_port, serve_process
from llm_bench.standin_engine import STANDIN_MODEL, Pace, StandinEngine
from llm_gateway.engine_metrics import read_engine_metrics
from llm_local.engine import SERVED_MODEL_NAME, EngineOptions, EngineProcess, build_tiny_model, engine_client
from llm_local.vllm_env import ensure_env
from tools.gateway_overhead import pod_gateway_env

GATEWAY_READY_TIMEOUT_S = 60.0
ENGINE_READY_TIMEOUT_S = 900.0  # two shared cores: vLLM's start takes a minute or more
# vLLM's access log line for an answered render (uvicorn's, in the engine's output).
RENDERED = re.compile(r'"POST /v1/completions/render HTTP/1\.1" 200')


@dataclass(frozen=True)
class Worker:
    """One of the router's workers: its gateway's URL and log, and what its engine counted so far."""

    url: str
    gateway_log: Path
    renders: Callable[[], int]  # render requests the engine answered
    prefix_cache: Callable[[], tuple[float, float]] | None  # (queries, hits) in prompt tokens; None: no cache

    def served(self) -> set[str]:
        """The X-Request-Ids of the requests whose record the gateway has written (FINISHED_WRITE_DELAY_S after
        each ends)."""
        ids = set()
        for line in self.gateway_log.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"event": "llm_request"' in line:
                request_id = json.loads(line).get("request_id")
                if request_id:
                    ids.add(request_id)
        return ids


@dataclass(frozen=True)
class Pool:
    """The workers, the model they serve, and the seconds their engines took to start (all at once)."""

    workers: list[Worker]
    model: str
    start_s: float


@contextmanager
def gateway(engine_url: str, folder: Path) -> Iterator[tuple[str, Path]]:
    """A gateway with its pod's settings and the render routes on in front of `engine_url`; (its URL, its log)."""
    env, _ = pod_gateway_env(engine_url, 0)
    env = {k: v for k, v in env.items() if k not in ("HOST", "PORT")} | {"RENDER_ROUTES": "true"}
    env["METRICS"] = "off"  # its metrics are not what this measures; its per-request log records are
    port = free_port()
    log = folder / f"gateway-{port}.log"
    with serve_process(
        [sys.executable, "-m", "llm_gateway"],
        env=env,
        log=log,
        port=port,
        ready_path="/readiness",
        ready_timeout_s=GATEWAY_READY_TIMEOUT_S,
    ) as server:
        yield server.url, log


@contextmanager
def standin_pool(count: int, pace: Pace, folder: Path) -> Iterator[Pool]:
    """`count` pace stand-ins on free ports, served by a thread of their own (this thread blocks while a gateway
    starts, and the gateways' readiness asks the engines), each behind a gateway."""
    engines = [StandinEngine(pace) for _ in range(count)]
    ports = [free_port() for _ in engines]
    loop = asyncio.new_event_loop()
    started = [asyncio.Event() for _ in engines]

    async def serve_all() -> None:
        await asyncio.gather(*(e.serve("127.0.0.1", p, s) for e, p, s in zip(engines, ports, started, strict=True)))

    task = loop.create_task(serve_all())
    thread = threading.Thread(target=lambda: loop.run_until_complete(asyncio.wait([task])), daemon=True)
    thread.start()
    try:

        async def ready() -> None:
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in started)), 10)

        asyncio.run_coroutine_threadsafe(ready(), loop).result(timeout=15)
        with ExitStack() as stack:
            workers = []
            for engine, port in zip(engines, ports, strict=True):
                url, log = stack.enter_context(gateway(f"http://127.0.0.1:{port}", folder))
                workers.append(Worker(url, log, lambda engine=engine: engine.renders, None))
            yield Pool(workers, STANDIN_MODEL, 0.0)
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=10)


def prefix_cache_counters(engine_url: str) -> tuple[float, float]:
    """The engine's prefix-cache (queries, hits) since it started, in prompt tokens, from its /metrics."""
    with engine_client(engine_url) as engine:
        reading = read_engine_metrics(engine.get("/metrics", timeout=10).text)
    if reading.prefix_cache_queries is None or reading.prefix_cache_hits is None:
        raise RuntimeError(f"the engine at {engine_url} publishes no prefix-cache counters")
    return reading.prefix_cache_queries, reading.prefix_cache_hits


def renders_in(engine_log: Path) -> int:
    """The render requests vLLM answered, from its access log."""
    return len(RENDERED.findall(engine_log.read_text(encoding="utf-8", errors="replace")))


@contextmanager
def cpu_pool(count: int, folder: Path) -> Iterator[Pool]:
    """`count` of vLLM's CPU engines with the tiny model, started at once with the render routes on (as
    `RENDER_ROUTES=true make run-llm` starts one), each on its own Unix socket and behind a gateway; stopped at
    the end."""
    model = build_tiny_model(ensure_env())
    with ExitStack() as stack:
        # Not under `folder`: a temporary folder's path can be longer than a Unix socket's 107 bytes allow.
        sockets = stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-engines-"))
        engines, logs = [], []
        started = time.monotonic()
        for index in range(count):
            logs.append(folder / f"engine-{index}.log")
            options = EngineOptions(socket=f"{sockets}/{index}.sock", render_routes=True)
            engine = EngineProcess(options, model, log=stack.enter_context(logs[-1].open("w", encoding="utf-8")))
            stack.callback(engine.stop)
            engines.append(engine)
        for engine in engines:
            engine.wait_ready(ENGINE_READY_TIMEOUT_S)
        start_s = time.monotonic() - started
        workers = []
        for engine, log in zip(engines, logs, strict=True):
            url, gateway_log = stack.enter_context(gateway(engine.url, folder))
            workers.append(
                Worker(url, gateway_log, partial(renders_in, log), partial(prefix_cache_counters, engine.url))
            )
        yield Pool(workers, SERVED_MODEL_NAME, start_s)
