"""The local LLM stack once per test session, started as `make run-llm` starts it (`python -m llm_local`):
the tiny model on vLLM's CPU engine behind the gateway with its default settings. At the end of the session
it is stopped with SIGTERM, and the engine must be gone with it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from llm_local.engine import SERVED_MODEL_NAME
from llm_local.vllm_env import NoInterpreter, ensure_env
from tests.llm.stack import GatewayProcess, LocalStack, run_local_stack

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
def local_stack(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`python -m llm_local` on free loopback ports, ready; stopped with SIGTERM, engine included, at the end."""
    with run_local_stack(tmp_path_factory.mktemp("llm-local")) as stack:
        yield stack


@pytest.fixture(scope="session")
def engine_url(local_stack: LocalStack) -> str:
    """vLLM's own URL in the session's stack (for its /metrics and /tokenize, and for extra gateways)."""
    return local_stack.engine_url


@pytest.fixture(scope="session")
def gateway(local_stack: LocalStack) -> GatewayProcess:
    """The session stack's gateway (default settings, AUTH=off)."""
    return local_stack.gateway


def client_for(url: str, api_key: str = "unused-locally") -> openai.OpenAI:
    """The official client on the gateway's /v1, without its automatic retries (they would hide a 429 or 503)."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=120)


@pytest.fixture
def client(gateway: GatewayProcess) -> openai.OpenAI:
    """The official `openai` client, through the default gateway."""
    return client_for(gateway.url)
