"""A stand-in for vLLM's OpenAI server that streams at a fixed pace, for measuring what sits in front of it.

    python -m llm_bench.standin_engine --port 8001 --ttft-ms 50 --gap-ms 10    # paced
    python -m llm_bench.standin_engine --port 8001 --ttft-ms 0 --gap-ms 0      # full speed
    python -m llm_bench.standin_engine --port 8001 --uds /tmp/engine.sock     # also on a Unix socket

It serves what the gateway and the benchmark call: `GET /health`, `GET /v1/models`, `GET /metrics` (no samples)
and `POST /v1/completions`, streamed or whole, with vLLM's chunk layout (one event per token, the usage chunk
with `choices: []` when `stream_options.include_usage` is asked, then `data: [DONE]`); and, for the gateway's
tests, `POST /v1/embeddings` (one small vector per input) and `POST /v1/responses`, whole or streamed in the
Responses API's layout (`event:` and `data:` lines, the usage in the closing `response.completed`); and vLLM
0.27.1's render routes (`POST /v1/completions/render`, `/v1/chat/completions/render`, which vllm-router's
cache_aware policy calls), answered in their shape: a GenerateRequest (a list of one for completions) whose
`token_ids` hold one id per word of the prompt (of the messages' text for chat), the same word the same id, so
prompts that share words at their start share ids there. Every answer is
`max_tokens` long (as with `ignore_eos`); a prompt counts one token per word. Token i of a request is due
`ttft + i * gap` after the request arrived, whatever the load, so the only latency a client sees beyond the
pace is what lies between it and this server. With a gap of 0 the tokens go out as fast as the loop allows,
one event each.

Plain asyncio streams, HTTP/1.1 with keep-alive and chunked transfer encoding (as uvicorn answers vLLM's
streams): it must cost little, since it shares a core with the benchmark's client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import uuid
import zlib
from dataclasses import dataclass, field

STANDIN_MODEL = "standin"
TOKEN_TEXT = " tok"  # noqa: S105  # the text of every token, not a secret
_MAX_HEAD_BYTES = 64 * 1024
_VOCABULARY = 32_000  # render's token ids are below this, as a small model's vocabulary
COMPLETIONS_RENDER_PATH = "/v1/completions/render"
CHAT_RENDER_PATH = "/v1/chat/completions/render"


@dataclass(frozen=True)
class Pace:
    """How the stand-in answers: time to the first token, gap between tokens (seconds; 0: full speed)."""

    ttft_s: float = 0.05
    gap_s: float = 0.01


@dataclass
class StandinEngine:
    """The server's state: its pace, its model name, and (when `record` is on) every completion prompt it got."""

    pace: Pace = field(default_factory=Pace)
    model: str = STANDIN_MODEL
    record: bool = False
    prompts: list[str] = field(default_factory=list)
    connections: int = 0  # connections accepted so far
    renders: int = 0  # render requests answered so far

    async def serve(
        self, host: str, port: int, started: asyncio.Event | None = None, *, uds: str | None = None
    ) -> None:
        """Serve on host:port, and with `uds` on that Unix socket path too (as vLLM's `--uds`, for a gateway
        that reaches its engine as on its pod), until cancelled; `started` is set once the sockets listen."""
        servers = [await asyncio.start_server(self._connection, host, port, backlog=1024)]
        if uds is not None:
            servers.append(await asyncio.start_unix_server(self._connection, uds, backlog=1024))
        try:
            if started is not None:
                started.set()
            await asyncio.gather(*(server.serve_forever() for server in servers))
        finally:
            for server in servers:
                server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = time.monotonic()
                method, path, length = _parse_head(head)
                body = await reader.readexactly(length) if length else b""
                await self._answer(method, path, body, arrived, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> None:
        if method == "GET" and path == "/health":
            _send_whole(writer, 200, b"")
        elif method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "standin"}]}
            _send_whole(writer, 200, json.dumps(models).encode())
        elif method == "GET" and path == "/metrics":
            _send_whole(writer, 200, b"", content_type=b"text/plain; version=0.0.4")
        elif method == "POST" and path == "/v1/completions":
            await self._completion(body, arrived, writer)
        elif method == "POST" and path == "/v1/embeddings":
            await self._embeddings(body, arrived, writer)
        elif method == "POST" and path == "/v1/responses":
            await self._responses(body, arrived, writer)
        elif method == "POST" and path in (COMPLETIONS_RENDER_PATH, CHAT_RENDER_PATH):
            self._render(path, body, writer)
        else:
            _send_whole(writer, 404, _error(f"no route {method} {path}", 404))
        await writer.drain()

    async def _completion(self, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(body)
            prompt = request["prompt"]
            tokens = int(request.get("max_tokens") or 16)
            if not isinstance(prompt, str) or tokens < 1:
                raise ValueError("prompt must be a string and max_tokens positive")
        except (ValueError, KeyError, TypeError) as exc:
            _send_whole(writer, 400, _error(f"bad request: {exc}", 400))
            return
        if self.record:
            self.prompts.append(prompt)
        prompt_tokens = len(prompt.split())
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + tokens, "completion_tokens": tokens}
        head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time())}
        head["model"] = self.model
        if request.get("stream") is not True:
            await self._until(arrived + self.pace.ttft_s + (tokens - 1) * self.pace.gap_s)
            choice = {"index": 0, "text": TOKEN_TEXT * tokens, "logprobs": None, "finish_reason": "length"}
            choice["stop_reason"] = None
            _send_whole(writer, 200, json.dumps({**head, "choices": [choice], "usage": usage}).encode())
            return
        options = request.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        # The fields every event shares, without the closing brace: each event adds its own and closes.
        prefix = json.dumps(head, separators=(",", ":"))[:-1].encode()
        middle = _event(prefix + b',"choices":[' + _choice(None) + b"]}")
        for index in range(tokens):
            await self._until(arrived + self.pace.ttft_s + index * self.pace.gap_s)
            last = index == tokens - 1
            writer.write(_event(prefix + b',"choices":[' + _choice("length") + b"]}") if last else middle)
            await writer.drain()
        if include_usage:
            usage_json = json.dumps(usage, separators=(",", ":")).encode()
            writer.write(_event(prefix + b',"choices":[],"usage":' + usage_json + b"}"))
        writer.write(_event(b"[DONE]") + b"0\r\n\r\n")

    async def _embeddings(self, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(body)
            given = request["input"]
            inputs = [given] if isinstance(given, str) else list(given)
            if not inputs or not all(isinstance(text, str) for text in inputs):
                raise ValueError("input must be a string or a list of strings")
        except (ValueError, KeyError, TypeError) as exc:
            _send_whole(writer, 400, _error(f"bad request: {exc}", 400))
            return
        await self._until(arrived + self.pace.ttft_s)
        tokens = sum(len(text.split()) for text in inputs)
        data = [{"index": i, "object": "embedding", "embedding": [1.0, 0.0]} for i in range(len(inputs))]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}
        answer = {"id": f"embd-{uuid.uuid4().hex}", "object": "list", "model": self.model, "data": data}
        _send_whole(writer, 200, json.dumps({**answer, "usage": usage}).encode())

    async def _responses(self, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(body)
            prompt = request["input"]
            tokens = int(request.get("max_output_tokens") or 16)
            if not isinstance(prompt, str) or tokens < 1:
                raise ValueError("input must be a string and max_output_tokens positive")
        except (ValueError, KeyError, TypeError) as exc:
            _send_whole(writer, 400, _error(f"bad request: {exc}", 400))
            return
        usage = {"input_tokens": len(prompt.split()), "output_tokens": tokens}
        usage["total_tokens"] = usage["input_tokens"] + tokens
        message = {"id": "msg-standin", "type": "message", "role": "assistant", "status": "completed"}
        message["content"] = [{"type": "output_text", "text": TOKEN_TEXT * tokens, "annotations": []}]
        done = {"id": f"resp-{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time())}
        done.update(model=self.model, status="completed", output=[message], usage=usage)
        if request.get("stream") is not True:
            await self._until(arrived + self.pace.ttft_s + (tokens - 1) * self.pace.gap_s)
            _send_whole(writer, 200, json.dumps(done).encode())
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        opening = {**done, "status": "in_progress", "output": [], "usage": None}
        writer.write(_named_event({"type": "response.created", "response": opening, "sequence_number": 0}))
        for index in range(tokens):
            await self._until(arrived + self.pace.ttft_s + index * self.pace.gap_s)
            delta = {"type": "response.output_text.delta", "delta": TOKEN_TEXT, "sequence_number": index + 1}
            delta.update(item_id="msg-standin", output_index=0, content_index=0, logprobs=[])
            writer.write(_named_event(delta))
            await writer.drain()
        writer.write(_named_event({"type": "response.completed", "response": done, "sequence_number": tokens + 1}))
        writer.write(b"0\r\n\r\n")

    def _render(self, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        """vLLM 0.27.1's render answer (vllm/entrypoints/scale_out/render/api_router.py: a GenerateRequest of
        token_ids/protocol.py, a list of them for completions), with the fields a router reads."""
        try:
            request = json.loads(body)
            if path == CHAT_RENDER_PATH:
                text = " ".join(str(m.get("content") or "") for m in request["messages"])
            else:
                text = request["prompt"]
            if not isinstance(text, str) or not text.split():
                raise ValueError("the prompt must be a non-empty string")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            _send_whole(writer, 400, _error(f"bad request: {exc}", 400))
            return
        self.renders += 1
        ids = [zlib.crc32(word.encode()) % _VOCABULARY for word in text.split()]
        rendered = {"request_id": uuid.uuid4().hex, "token_ids": ids, "model": self.model, "stream": False}
        rendered["sampling_params"] = {"max_tokens": request.get("max_tokens")}
        _send_whole(writer, 200, json.dumps(rendered if path == CHAT_RENDER_PATH else [rendered]).encode())

    async def _until(self, due: float) -> None:
        delay = due - time.monotonic()
        # At full speed, still let the other streams in between two tokens.
        await asyncio.sleep(delay if delay > 0 else 0)


def _choice(finish_reason: str | None) -> bytes:
    reason = "null" if finish_reason is None else f'"{finish_reason}"'
    return (
        f'{{"index":0,"text":"{TOKEN_TEXT}","logprobs":null,"finish_reason":{reason},"stop_reason":null,'
        '"prompt_token_ids":null,"token_ids":null}'
    ).encode()


def _event(data: bytes) -> bytes:
    """One SSE event as one HTTP chunk."""
    payload = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _named_event(payload: dict[str, object]) -> bytes:
    """One Responses API SSE event (`event: <type>` and its `data:`) as one HTTP chunk."""
    data = b"event: %s\ndata: %s\n\n" % (str(payload["type"]).encode(), json.dumps(payload).encode())
    return b"%x\r\n%s\r\n" % (len(data), data)


def _parse_head(head: bytes) -> tuple[str, str, int]:
    """Method, path (without the query) and Content-Length of a request head."""
    if len(head) > _MAX_HEAD_BYTES:
        raise ConnectionError("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return method, target.split("?", 1)[0], length


def _send_whole(
    writer: asyncio.StreamWriter, status: int, body: bytes, content_type: bytes = b"application/json"
) -> None:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason, content_type, len(body), body)
    )


def _error(message: str, code: int) -> bytes:
    return json.dumps({"error": {"message": message, "type": "BadRequestError", "code": code}}).encode()


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m llm_bench.standin_engine", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="time to the first token")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="time between tokens (0: as fast as it can)")
    parser.add_argument("--model", default=STANDIN_MODEL, help="the served model name")
    parser.add_argument("--uds", help="a Unix socket path to serve on too (as vLLM's --uds)")
    args = parser.parse_args(argv)
    if args.ttft_ms < 0 or args.gap_ms < 0:
        parser.error("--ttft-ms and --gap-ms must not be negative")
    engine = StandinEngine(Pace(args.ttft_ms / 1000, args.gap_ms / 1000), args.model)
    try:
        import uvloop  # the gateway's own loop where installed: a lighter stand-in

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        run(engine.serve(args.host, args.port, uds=args.uds))


if __name__ == "__main__":
    main()
