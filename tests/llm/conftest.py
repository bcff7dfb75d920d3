"""The LLM tests' view of the session's local LLM stack (tests/conftest.py `local_stack`: `python -m llm_local`
as `make run-llm` starts it, the tiny model on vLLM's CPU engine behind the gateway with its default settings,
stopped with SIGTERM at the end of the session, engine included)."""

from __future__ import annotations

import openai
import pytest

from llm_local.engine import SERVED_MODEL_NAME
from tests.llm.stack import GatewayProcess, LocalStack

MODEL = SERVED_MODEL_NAME


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
