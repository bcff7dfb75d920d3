"""A light closed-loop client for streamed completions, on plain asyncio streams: for measuring a proxy's
overhead, where the client shares a core with the engine stand-in and must cost far less per token than what
it measures (httpx's line iterator and a JSON parse per event cost more than a proxy should).

Each of `streams` workers keeps one keep-alive connection and sends its next request when the last one ended.
A token is an SSE event with a non-empty `choices` list (vLLM's compact JSON); the time of its arrival is when
the read that completed it returned. The response may be chunked, sized or closed-delimited; SSE comments are skipped.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from llm_bench.load import prompt
from llm_bench.report import Timing

_SEPARATOR = b"\n\n"
_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class StreamLoad:
    """One run: `streams` concurrent clients, each request `input_words` words in and `output_tokens` out; until
    `requests` were sent, or (when `duration_s` is set) until that long has passed."""

    streams: int
    output_tokens: int
    input_words: int = 16
    requests: int = 0
    duration_s: float | None = None


class _Connection:
    """One keep-alive HTTP/1.1 connection, opened again when the server closed it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None or self.reader.at_eof():
            self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _one(connection: _Connection, path: str, body: bytes) -> Timing:
    timing = Timing(start=time.monotonic(), end=0.0, status=0)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {connection.host}:{connection.port}\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        reader, writer = await connection.open()
        writer.write(head + body)
        response_head = await reader.readuntil(b"\r\n\r\n")
        lines = response_head.decode("latin-1").split("\r\n")
        timing.status = int(lines[0].split(" ", 2)[1])
        headers = {
            name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])
        }
        pending = b""
        done = False
        async for data in _body(reader, headers):
            pending += data
            if timing.status != 200 or _SEPARATOR not in pending:
                continue
            *events, pending = pending.split(_SEPARATOR)
            now = time.monotonic()
            for event in events:
                if event.startswith(b"data: [DONE]"):
                    done = True
                elif b'"choices":[{' in event:  # vLLM's compact JSON; the usage chunk has `"choices":[]`
                    timing.token_times.append(now)
                    timing.ttft_s = timing.ttft_s if timing.ttft_s is not None else now - timing.start
                elif event.startswith(b"data: {") and b'"error"' in event:
                    timing.error = event[6:].decode(errors="replace")[:300]
        if timing.status != 200:
            timing.error = pending.decode(errors="replace")[:300]
        elif not done and timing.error is None:
            timing.error = "the stream ended without [DONE]"
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        if headers.get("connection", "").lower() == "close" or not (chunked or "content-length" in headers):
            connection.close()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError) as exc:
        timing.error = f"{type(exc).__name__}: {exc}"
        connection.close()
    timing.output_tokens = len(timing.token_times)
    timing.end = time.monotonic()
    return timing


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body's bytes as they come: de-chunked, sized, or up to the connection's end."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers: the blank line that ends the body
                return
            yield (await reader.readexactly(size + 2))[:-2]
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, _READ_BYTES))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(data)
            yield data
    else:
        while data := await reader.read(_READ_BYTES):
            yield data


async def run_streams(base_url: str, model: str, load: StreamLoad, *, seed: int | str) -> list[Timing]:
    """Run `load` against `base_url`'s /v1/completions; every request's timing. Prompts differ from each other
    and from those of any other seed (a leading number of their own)."""
    url = urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    rng = random.Random(seed)  # noqa: S311  # prompt text, not a secret
    deadline = None if load.duration_s is None else time.monotonic() + load.duration_s
    left = load.requests
    timings: list[Timing] = []

    def next_body() -> bytes | None:
        nonlocal left
        if deadline is not None:
            if time.monotonic() >= deadline:
                return None
        elif left <= 0:
            return None
        left -= 1
        request = {
            "model": model,
            "prompt": prompt(load.input_words, rng),
            "max_tokens": load.output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
        return json.dumps(request).encode()

    async def worker() -> None:
        connection = _Connection(host, port)
        try:
            while (body := next_body()) is not None:
                timings.append(await _one(connection, "/v1/completions", body))
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(load.streams)))
    return timings
