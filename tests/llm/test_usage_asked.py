"""The gateway counts a stream's tokens from the usage chunk it asks vLLM for, whether or not the client asked: the
request reaches the engine with `stream_options.include_usage` added and nothing else changed, whatever the body's
spacing, key order, escapes or encoding (json.loads reads UTF-8, -16 and -32 alike)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_gateway.usage import with_usage_asked
from tests.llm.stack import run_gateway, run_standin

PROMPT = 'ein Käse, un café, \u2603 and "quotes"'
REQUEST: dict[str, Any] = {"model": "standin", "prompt": PROMPT, "max_tokens": 5, "stream": True}
BODIES = {
    "compact": json.dumps(REQUEST, separators=(",", ":")).encode(),
    "spaced": b"\r\n  " + json.dumps(REQUEST, indent=2, ensure_ascii=False).encode() + b"\n",
    "utf-16": json.dumps(REQUEST, ensure_ascii=False).encode("utf-16"),
    "utf-16-le without a BOM": json.dumps(REQUEST, ensure_ascii=False).encode("utf-16-le"),
    "utf-8 with a BOM": json.dumps(REQUEST).encode("utf-8-sig"),
    "stream_options null": json.dumps({**REQUEST, "stream_options": None}).encode(),
    "include_usage false": json.dumps({**REQUEST, "stream_options": {"include_usage": False}}).encode(),
}


@pytest.mark.parametrize("name", BODIES)
def test_the_engine_gets_the_same_request_asking_for_usage(name: str) -> None:
    body = BODIES[name]
    asked = json.loads(with_usage_asked(json.loads(body), body))
    assert asked == {**REQUEST, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize("name", ["compact", "spaced"])
def test_a_utf8_body_without_stream_options_is_forwarded_byte_for_byte_with_the_option_added(name: str) -> None:
    body = BODIES[name]
    forwarded = with_usage_asked(json.loads(body), body)
    brace = body.index(b"{") + 1
    option = forwarded[brace : len(forwarded) - len(body) + brace]
    assert forwarded[:brace] == body[:brace] and forwarded.endswith(body[brace:])
    assert option == b'"stream_options":{"include_usage":true},'


def test_an_empty_object_stays_valid_json() -> None:
    assert json.loads(with_usage_asked({}, b" {} ")) == {"stream_options": {"include_usage": True}}


def test_every_body_is_counted_and_the_client_gets_no_usage_it_did_not_ask_for(tmp_path: Path) -> None:
    with run_standin(record=True) as (url, engine), run_gateway(url, tmp_path) as gateway:
        streams = []
        for name, body in BODIES.items():
            response = httpx.post(
                f"{gateway.url}/v1/completions",
                content=body,
                headers={"content-type": "application/json"},
                timeout=30,
            )
            assert response.status_code == 200, (name, response.text)
            streams.append(response.content)
        records = gateway.wait_record(len(BODIES))
    assert engine.prompts == [PROMPT] * len(BODIES)
    for name, stream in zip(BODIES, streams, strict=True):
        assert stream.count(b'"choices":[{') == 5 and stream.endswith(b"data: [DONE]\n\n"), name
        assert b'"usage"' not in stream, name
    prompt_tokens = len(PROMPT.split())
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in records] == [(prompt_tokens, 5)] * len(BODIES)
