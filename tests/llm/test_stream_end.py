"""A stream's last events and its end leave the gateway as one message to the server (one write to the client): when
the engine's `[DONE]` comes with its body's end, as vLLM's usually does, the client does not wait a turn of the
gateway's loop (a second write) for the end, and under load the gateway writes once less per request. Driven as the
server drives the gateway's ASGI app, in front of the stand-in engine, with each way a stream's pieces are written:
through `send` only, or through the server's BODY_NOWAIT write with `send` for what it declines."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from common.http.protocol import BODY_NOWAIT, BodyNowait
from llm_gateway.server import build_gateway
from llm_gateway.settings import load_settings
from tests.llm.stack import run_standin

TOKENS = 40


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


class Flow:
    write_paused = False


class Cycle:
    """uvicorn's request cycle, as far as BodyNowait reads it."""

    def __init__(self) -> None:
        self.transport, self.flow = Transport(), Flow()
        self.scope = {"method": "POST"}
        self.disconnected = self.response_complete = False
        self.response_started = self.chunked_encoding = True


async def stream_messages(upstream_url: str, writes: str) -> tuple[list[dict[str, Any]], bytes]:
    """The ASGI messages the gateway sends for one streamed completion, and what it wrote past them."""
    gateway = build_gateway(load_settings(upstream_url=upstream_url, auth="off"))
    request = {"model": "standin", "prompt": "a b c", "max_tokens": TOKENS, "stream": True}
    body = json.dumps(request).encode()
    cycle = Cycle()
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/v1/completions",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "extensions": {} if writes == "send" else {BODY_NOWAIT: BodyNowait(cycle)},
    }
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    client_stays = asyncio.Event()  # never set: as uvicorn's `receive` after the body, until the client leaves

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await client_stays.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        await gateway(scope, receive, send)
    finally:
        await gateway.http.aclose()
    return sent, b"".join(cycle.transport.written)


@pytest.mark.parametrize("writes", ["send", "nowait"])
def test_the_last_event_and_the_end_of_the_stream_go_out_together(writes: str) -> None:
    with run_standin() as (url, _):
        sent, relayed = asyncio.run(stream_messages(url, writes))
    bodies = [message for message in sent if message["type"] == "http.response.body"]
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    last = bodies[-1]
    assert last["more_body"] is False and last["body"].endswith(b"data: [DONE]\n\n")
    assert all(message["body"] for message in bodies)  # no empty message just to end the body
    streamed = relayed + b"".join(message["body"] for message in bodies)
    assert streamed.count(b'"choices":[{') == TOKENS and b'"usage"' not in streamed  # usage unasked: dropped
