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

SSE_SEPARATOR = b"\n\n"  # vLLM ends every event with a blank line (`yield f"data: {data}\n\n"`)
_DATA_PREFIX = b"data: "


@dataclass
class RequestRecord:
    """What the gateway logs about one generation request."""

    route: str
    model: str | None
    stream: bool
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    outcome: str = "pending"  # completed | rejected | client_gone | cut | refused | upstream_error | timed_out
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_event_at: float | None = None
    ended: float | None = None  # set when the request's last byte went out, or it was refused

    def take_usage(self, usage: Any) -> None:
        """Remember the counts of a `usage` object, if it is one."""
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
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
            "status": self.status,
            "outcome": self.outcome,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_ms": round((now - self.started) * 1000, 1),
            "ttft_ms": None if self.first_event_at is None else round((self.first_event_at - self.started) * 1000, 1),
        }


class EventStream:
    """Splits upstream bytes into whole SSE events, counts usage, and drops the usage chunk if unasked."""

    def __init__(self, record: RequestRecord, *, client_wants_usage: bool) -> None:
        self._record = record
        self._client_wants_usage = client_wants_usage
        self._pending = b""
        self.done = False  # the terminating `data: [DONE]` event is among those returned so far

    def feed(self, chunk: bytes) -> bytes:
        """The whole events completed by `chunk`, as bytes to forward now (possibly empty)."""
        self._pending += chunk
        end = self._pending.rfind(SSE_SEPARATOR)
        if end < 0:
            return b""
        complete, self._pending = self._pending[: end + len(SSE_SEPARATOR)], self._pending[end + len(SSE_SEPARATOR) :]
        if self._record.first_event_at is None:
            self._record.first_event_at = time.monotonic()
        self.done = self.done or complete.rstrip().endswith(_DATA_PREFIX + b"[DONE]")
        if b'"usage"' not in complete:
            return complete
        kept = [event for event in complete.split(SSE_SEPARATOR)[:-1] if self._keep(event)]
        return b"".join(event + SSE_SEPARATOR for event in kept)

    def rest(self) -> bytes:
        """Bytes left after the last whole event (a stream that ended mid-event)."""
        rest, self._pending = self._pending, b""
        return rest

    def _keep(self, event: bytes) -> bool:
        if not event.startswith(_DATA_PREFIX) or b'"usage"' not in event:
            return True
        try:
            payload = json.loads(event[len(_DATA_PREFIX) :])
        except ValueError:
            return True
        if not isinstance(payload, dict) or not payload.get("usage"):
            return True
        self._record.take_usage(payload["usage"])
        return self._client_wants_usage or payload.get("choices") != []
