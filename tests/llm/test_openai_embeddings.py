"""The official `openai` client against `make run-llm-embed`: the tiny model as an embedding model on vLLM's CPU
engine (`--runner pooling --convert embed`), behind the gateway. One engine for the module."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from llm_local.engine import EMBEDDING_MODEL_NAME
from tests.llm.conftest import client_for
from tests.llm.stack import LocalStack, run_local_stack


@pytest.fixture(scope="module")
def embed_stack(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """`python -m llm_local` with ENGINE_TASK=embed, as `make run-llm-embed` starts it."""
    with run_local_stack(tmp_path_factory.mktemp("llm-embed"), env={"ENGINE_TASK": "embed"}) as stack:
        yield stack


def test_embeddings_are_made_and_counted(embed_stack):
    client, gateway = client_for(embed_stack.gateway.url), embed_stack.gateway
    before = len(gateway.records())
    reply = client.embeddings.create(model=EMBEDDING_MODEL_NAME, input=["hello world", "a robot's story"])
    assert [item.index for item in reply.data] == [0, 1]
    vectors = [item.embedding for item in reply.data]
    assert len(vectors[0]) == len(vectors[1]) > 0 and vectors[0] != vectors[1]
    assert all(math.isclose(math.hypot(*vector), 1.0, rel_tol=1e-3) for vector in vectors)  # normalized
    assert reply.usage.prompt_tokens > 0 and reply.usage.total_tokens == reply.usage.prompt_tokens
    record = gateway.wait_record(before + 1)[-1]
    assert (record["route"], record["status"], record["outcome"]) == ("/v1/embeddings", 200, "completed")
    assert (record["prompt_tokens"], record["completion_tokens"]) == (reply.usage.prompt_tokens, 0)
    assert client.models.retrieve(EMBEDDING_MODEL_NAME).id == EMBEDDING_MODEL_NAME


def test_generation_on_an_embedding_model_is_a_404_that_says_why(embed_stack):
    client = client_for(embed_stack.gateway.url)
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model=EMBEDDING_MODEL_NAME, messages=[{"role": "user", "content": "hi"}])
    assert "is an embedding model" in raised.value.message and "/v1/chat/completions" in raised.value.message
    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model=EMBEDDING_MODEL_NAME, input="hi")
    assert "/v1/responses needs a text-generation model" in raised.value.message
