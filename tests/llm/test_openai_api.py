"""The official `openai` client against the real stack: the gateway in front of vLLM's CPU engine."""

from __future__ import annotations

import openai
import pytest

from llm_local.engine import engine_client
from tests.llm.conftest import MODEL

MESSAGES = [{"role": "user", "content": "Tell me a story about a robot."}]
# vLLM's sampling extension: generate exactly max_tokens (the random-weight model may emit EOS early).
EXACT = {"ignore_eos": True}


def prompt_tokens(engine_url: str, **body: object) -> int:
    """How many tokens vLLM's own tokenizer endpoint counts for a prompt or chat."""
    with engine_client(engine_url) as engine:
        response = engine.post("/tokenize", json={"model": MODEL, **body}, timeout=30)
    response.raise_for_status()
    return response.json()["count"]


def test_models_lists_the_served_model(client):
    assert [model.id for model in client.models.list()] == [MODEL]


def test_chat_completion_answers_and_is_counted(client, gateway, engine_url):
    before = len(gateway.records())
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=6, extra_body=EXACT)
    assert reply.choices[0].message.role == "assistant"
    assert isinstance(reply.choices[0].message.content, str)
    assert reply.choices[0].finish_reason == "length"
    expected_prompt = prompt_tokens(engine_url, messages=MESSAGES, add_generation_prompt=True)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (expected_prompt, 6)
    record = gateway.wait_record(before + 1)[-1]
    assert record["route"] == "/v1/chat/completions"
    assert (record["status"], record["outcome"], record["stream"]) == (200, "completed", False)
    assert (record["prompt_tokens"], record["completion_tokens"]) == (expected_prompt, 6)


def test_completion_answers_and_is_counted(client, gateway, engine_url):
    before = len(gateway.records())
    reply = client.completions.create(model=MODEL, prompt="Hello, world", max_tokens=5, extra_body=EXACT)
    assert isinstance(reply.choices[0].text, str)
    expected_prompt = prompt_tokens(engine_url, prompt="Hello, world")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (expected_prompt, 5)
    record = gateway.wait_record(before + 1)[-1]
    assert (record["route"], record["prompt_tokens"], record["completion_tokens"]) == (
        "/v1/completions",
        expected_prompt,
        5,
    )


def test_chat_stream_with_usage(client, gateway):
    before = len(gateway.records())
    stream = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=EXACT,
    )
    chunks = list(stream)
    content = [chunk for chunk in chunks if chunk.choices]
    assert content and all(chunk.usage is None for chunk in content)
    assert content[-1].choices[0].finish_reason == "length"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None and usage.completion_tokens == 12
    record = gateway.wait_record(before + 1)[-1]
    assert record["stream"] and (record["prompt_tokens"], record["completion_tokens"]) == (usage.prompt_tokens, 12)


def test_stream_without_usage_gets_none_but_is_counted(client, gateway):
    """The gateway asks vLLM for the usage chunk to count tokens, and keeps it from a client that did not ask."""
    before = len(gateway.records())
    stream = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=7, stream=True, extra_body=EXACT
    )
    chunks = list(stream)
    assert chunks and all(chunk.usage is None and chunk.choices for chunk in chunks)
    record = gateway.wait_record(before + 1)[-1]
    assert record["completion_tokens"] == 7 and record["prompt_tokens"] > 0


def test_models_retrieve_gives_the_served_model_and_a_404_for_another(client):
    model = client.models.retrieve(MODEL)
    assert (model.id, model.object) == (MODEL, "model")
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("Qwen/Qwen2.5-1.5B-Instruct")
    assert raised.value.status_code == 404
    assert f"serves '{MODEL}'" in raised.value.message and "'Qwen/Qwen2.5-1.5B-Instruct' does not exist" in (
        raised.value.message
    )


def test_responses_answer_and_are_counted(client, gateway):
    """The Responses API, whole and streamed: vLLM's usage (input/output tokens) is what the gateway counts."""
    before = len(gateway.records())
    reply = client.responses.create(model=MODEL, input="Tell me a story.", max_output_tokens=6, extra_body=EXACT)
    assert reply.object == "response" and isinstance(reply.output_text, str)
    assert reply.usage is not None and reply.usage.output_tokens == 6
    events = list(
        client.responses.create(
            model=MODEL, input="Tell me a story.", max_output_tokens=5, stream=True, extra_body=EXACT
        )
    )
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert any(event.type == "response.output_text.delta" for event in events)
    streamed_usage = events[-1].response.usage
    whole, streamed = gateway.wait_record(before + 2)[-2:]
    assert (whole["route"], whole["stream"], whole["status"]) == ("/v1/responses", False, 200)
    assert (whole["prompt_tokens"], whole["completion_tokens"]) == (reply.usage.input_tokens, 6)
    assert (streamed["stream"], streamed["outcome"]) == (True, "completed")
    assert (streamed["prompt_tokens"], streamed["completion_tokens"]) == (streamed_usage.input_tokens, 5)
    # The first token, not the stream's opening events: the time to it is no shorter than to response.created.
    assert streamed["ttft_ms"] is not None and streamed["ttft_ms"] <= streamed["latency_ms"]


def test_embeddings_on_a_generation_model_is_a_404_that_says_why(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.embeddings.create(model=MODEL, input="hello")
    assert "makes no embeddings" in raised.value.message and "--runner pooling" in raised.value.message
    assert raised.value.body["type"] == "not_found_error"
