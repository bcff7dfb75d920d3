"""Tool calls and structured output with the official `openai` client, through the gateway, on vLLM's CPU engine
(`make run-llm`'s stack: the tiny model, whose chat template writes tools as Qwen2.5's does, and the `hermes` parser).

The tiny model's weights are random, so what it says is noise; what is under test is that each feature reaches
vLLM untouched and comes back in OpenAI's shape, whole and streamed, with its tokens counted. A named tool choice
and a json_schema response format constrain the sampled tokens to the schema (vLLM's structured outputs), so even
noise parses and validates; the schemas keep every value short (enums, small integers) so the answer ends well
within max_tokens.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest

from tests.llm.conftest import MODEL, client_for
from tests.llm.stack import run_gateway
from tests.llm.test_errors import error_of

WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "The forecast for a city", "parameters": WEATHER_PARAMETERS},
    },
    {
        "type": "function",
        "function": {"name": "get_time", "description": "The time in a city", "parameters": {"type": "object"}},
    },
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
ASK = [{"role": "user", "content": "What will the weather be in Oslo for three days?"}]
# A finished round: the assistant's call and the tool's answer, as a client sends them back.
ROUND_TRIP = [
    *ASK,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "days": 3}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "rain"}'},
]
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": ["Ada", "Alan"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
        "admin": {"type": "boolean"},
    },
    "required": ["name", "age", "admin"],
    "additionalProperties": False,
}
JSON_SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA}}
MAX_TOKENS = 200


def test_a_named_tool_choice_returns_that_call_with_arguments_that_parse(client, gateway):
    before = len(gateway.records())
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice=NAMED, max_tokens=MAX_TOKENS, temperature=0
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_PARAMETERS)
    record = gateway.wait_record(before + 1)[-1]
    assert (record["status"], record["outcome"]) == (200, "completed")
    assert (record["prompt_tokens"], record["completion_tokens"]) == (
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )


def test_a_named_tool_choice_streams_its_arguments(client, gateway):
    before = len(gateway.records())
    stream = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=TOOLS,
        tool_choice=NAMED,
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [call for chunk in chunks for choice in chunk.choices for call in choice.delta.tool_calls or ()]
    assert {d.function.name for d in deltas if d.function and d.function.name} == {"get_weather"}
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    jsonschema.validate(json.loads(arguments), WEATHER_PARAMETERS)
    usage = chunks[-1].usage
    assert usage is not None
    record = gateway.wait_record(before + 1)[-1]
    assert record["stream"] and record["outcome"] == "completed"
    assert (record["prompt_tokens"], record["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)


def test_tool_choice_required_returns_a_call_of_a_listed_tool(client):
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS[:1], tool_choice="required", max_tokens=MAX_TOKENS, temperature=0
    )
    calls = reply.choices[0].message.tool_calls
    assert calls and all(call.function.name == "get_weather" for call in calls)
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), WEATHER_PARAMETERS)


def test_tool_choice_auto_and_a_tool_round_trip_are_answered(client):
    """ "auto" needs the engine's tool-call parser (without it vLLM answers 400); tool messages and an assistant's
    earlier calls go through the chat template; parallel_tool_calls passes through."""
    auto = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice="auto", parallel_tool_calls=False, max_tokens=8
    )
    assert auto.choices[0].message.role == "assistant"
    after_tool = client.chat.completions.create(
        model=MODEL, messages=ROUND_TRIP, tools=TOOLS, tool_choice="auto", max_tokens=8
    )
    assert after_tool.usage.prompt_tokens > auto.usage.prompt_tokens  # the call and its answer reached the prompt
    streamed = list(
        client.chat.completions.create(
            model=MODEL, messages=ROUND_TRIP, tools=TOOLS, tool_choice="auto", max_tokens=8, stream=True
        )
    )
    assert streamed and streamed[-1].choices[0].finish_reason is not None


def test_a_json_schema_response_format_returns_json_valid_against_it(client, gateway):
    before = len(gateway.records())
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format=JSON_SCHEMA_FORMAT,
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON_SCHEMA)
    record = gateway.wait_record(before + 1)[-1]
    assert record["completion_tokens"] == reply.usage.completion_tokens


def test_a_json_schema_response_format_streams_json_valid_against_it(client):
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format=JSON_SCHEMA_FORMAT,
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    jsonschema.validate(json.loads(text), PERSON_SCHEMA)


def test_a_json_object_response_format_returns_a_json_object(client):
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Answer in JSON."}],
        response_format={"type": "json_object"},
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    assert reply.choices[0].finish_reason == "stop", "the object ended within max_tokens"
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


def test_a_gateway_before_an_engine_without_structured_outputs_refuses_them_and_serves_auto(engine_url, tmp_path):
    """STRUCTURED_OUTPUTS=false, as on the Neuron pods (vllm-neuron ignores the grammar): each request that needs
    one is a 400 in OpenAI's shape naming its field, before it reaches the engine; tool_choice "auto" still serves."""
    with run_gateway(engine_url, tmp_path, {"STRUCTURED_OUTPUTS": "false"}) as gateway:
        client = client_for(gateway.url)
        refused = [
            ("tool_choice", {"messages": ASK, "tools": TOOLS, "tool_choice": NAMED}),
            ("tool_choice", {"messages": ASK, "tools": TOOLS, "tool_choice": "required"}),
            ("response_format", {"messages": ASK, "response_format": JSON_SCHEMA_FORMAT}),
            ("response_format", {"messages": ASK, "response_format": {"type": "json_object"}}),
        ]
        for param, body in refused:
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(model=MODEL, max_tokens=4, **body)
            error = error_of(caught.value)
            assert error["param"] == param and "structured outputs" in str(error["message"]), error
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model=MODEL,
                input="Describe a person.",
                text={"format": {"type": "json_schema", "name": "person", "schema": PERSON_SCHEMA}},
            )
        assert error_of(caught.value)["param"] == "text.format"
        auto = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS, tool_choice="auto", max_tokens=4)
        assert auto.choices[0].message.role == "assistant"
        assert [r["status"] for r in gateway.wait_record(1)] == [200]  # the refusals never reached the engine
