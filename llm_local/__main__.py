"""`python -m llm_local` (make run-llm): the tiny model on vLLM's CPU engine, behind the gateway, on HOST:PORT.

The engine listens on 127.0.0.1:ENGINE_PORT (default 8001), reachable only from this machine, or with
ENGINE_SOCKET=/path on that Unix socket instead, as on the cluster's pods (vLLM's --uds; a file left there by an
engine that is gone is removed first); the gateway on HOST:PORT (make run-llm: 127.0.0.1:8000) is what clients
use, and serves the chat page at /.
Sign-in is off (AUTH=off) unless the environment sets the gateway's AUTH variables. Ctrl-C or SIGTERM
stops both: the gateway drains first, then the engine is stopped. ENGINE_TASK=embed (make run-llm-embed)
serves the same tiny model as an embedding model, `tiny-llama-embed`, on /v1/embeddings instead of the
generation paths: one vLLM engine runs one kind of model. RENDER_ROUTES=true (the gateway's setting, for
vllm-router's cache_aware in front) starts the engine with what it needs to serve the render routes too.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import time
from types import FrameType

ENGINE_START_TIMEOUT_S = 600


def _exit_on_signal(sig: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> int:
    """Build what is missing, start the engine, wait for it, then serve the gateway until stopped."""
    from common.http.port_check import port_problem, socket_problem
    from common.logs import configure_logging
    from common.settings import SettingsError
    from llm_gateway.engine_address import UNIX_SCHEME, socket_path_problem
    from llm_gateway.engine_keep_alive import ENGINE_KEEP_ALIVE_S
    from llm_gateway.server import build_gateway, build_server
    from llm_gateway.settings import load_settings
    from llm_local.engine import (
        EMBEDDING_MODEL_NAME,
        ENGINE_TASKS,
        SERVED_MODEL_NAME,
        EngineOptions,
        EngineProcess,
        build_tiny_model,
    )
    from llm_local.vllm_env import ensure_env

    engine_port = os.environ.get("ENGINE_PORT", "8001")
    if not engine_port.isdigit() or not 0 < int(engine_port) < 65536:
        print(f"error: ENGINE_PORT must be a port number, not {engine_port!r}", file=sys.stderr)
        return 2
    task = os.environ.get("ENGINE_TASK", "generate")
    if task not in ENGINE_TASKS:
        print(f"error: ENGINE_TASK must be one of {', '.join(ENGINE_TASKS)}, not {task!r}", file=sys.stderr)
        return 2
    embed = task == "embed"
    engine_socket = os.environ.get("ENGINE_SOCKET") or None
    problem = None if engine_socket is None else socket_path_problem(f"{UNIX_SCHEME}{engine_socket}")
    if problem is not None:
        print(f"error: ENGINE_SOCKET: {problem}", file=sys.stderr)
        return 2
    engine_options = EngineOptions(
        port=int(engine_port),
        socket=engine_socket,
        task="embed" if embed else "generate",
        served_model_name=EMBEDDING_MODEL_NAME if embed else SERVED_MODEL_NAME,
    )
    try:
        # The chat page is on here (CHAT_PAGE=false in the environment turns it off; an embedding model has no chat);
        # the gateway's default is off.
        settings = load_settings(
            upstream_url=EngineProcess.url_of(engine_options),
            upstream_keep_alive_s=ENGINE_KEEP_ALIVE_S,  # the engine's, set in engine_environment()
            chat_page=os.environ.get("CHAT_PAGE", "false" if embed else "true"),
        )
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # RENDER_ROUTES=true (for vllm-router's cache_aware in front): the engine serves what the gateway forwards.
    engine_options = dataclasses.replace(engine_options, render_routes=settings.render_routes)
    # Both addresses are checked before anything starts: an engine left on ENGINE_PORT or ENGINE_SOCKET (by a
    # launcher killed with SIGKILL before the engine died with it) would otherwise answer for this one, whose engine
    # cannot bind.
    if engine_socket is not None:
        problem = socket_problem(engine_socket)
    else:
        problem = port_problem(engine_options.host, engine_options.port, variable="ENGINE_PORT", command="make run-llm")
    problem = problem or port_problem(settings.host, settings.port, command="make run-llm")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    log = logging.getLogger("llm_local")
    # A signal ends this process through `finally` (which stops the engine), also the one uvicorn re-raises
    # after its graceful stop: with the default handlers that re-raise would kill the process on the spot
    # and leave the engine, in its own process group, running.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_on_signal)

    started = time.monotonic()
    log.info("preparing vLLM's CPU environment (the first time: several minutes)")
    env = ensure_env()
    model_dir = build_tiny_model(env)
    log.info("starting vLLM", extra={"model": str(model_dir), "engine": EngineProcess.url_of(engine_options)})
    engine = EngineProcess(engine_options, model_dir)
    try:
        engine.wait_ready(ENGINE_START_TIMEOUT_S)
        gateway = build_gateway(settings)
        log.info(
            "ready",
            extra={
                "url": f"http://{settings.host}:{settings.port}/v1",
                "model": engine_options.served_model_name,
                "seconds": round(time.monotonic() - started, 1),
            },
        )
        build_server(gateway, settings).run()
    finally:
        engine.stop()
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
