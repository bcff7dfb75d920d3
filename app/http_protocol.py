"""uvicorn with bounded request heads: a size cap and a time limit for the headers to arrive.

uvicorn's default protocol (httptools) accepts headers of any size, and neither of its protocols
limits how long a client may take to send them, so slow or endless headers would hold connections
and memory. This serves with uvicorn's h11 protocol (uvicorn 0.54 `protocols/http/h11_impl.py`) and
adds both bounds. h11's own `max_incomplete_event_size` (passed from MAX_HEADER_BYTES) only limits
headers that are still incomplete after a read, so a large header that arrives in one read, or
pipelined behind another request, would pass; the connection here measures each head in h11's
buffer before h11 parses it and answers 431 past MAX_HEADER_BYTES. A connection whose request line
and headers are not complete within HEADER_TIMEOUT_S of its first byte (or of being opened) is closed.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings

# h11 ends a head at the first blank line and accepts bare LF line ends (h11 0.16 `_receivebuffer.py`).
_BLANK_LINE = re.compile(b"\n\r?\n")


class BoundedHeadConnection(h11.Connection):
    """h11's server side, refusing a request head longer than `max_head_bytes` however it arrives.

    The bytes of the next head sit at the start of h11's receive buffer whenever the client's side
    is IDLE: sent in one read, dribbled, or pipelined behind the previous request (which a check in
    `data_received` would miss, since those bytes arrive while the previous request is in progress).
    """

    def __init__(self, max_head_bytes: int):
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        self.head_too_large = False
        self._searched = 0  # bytes of the current head already searched for its end

    def next_event(self) -> Any:
        """h11's next event, or RemoteProtocolError (hint 431) if the next head is too large."""
        if self.their_state is h11.IDLE and self._head_too_large():
            self.head_too_large = True
            raise h11.RemoteProtocolError("request headers too large", error_status_hint=431)
        event = super().next_event()
        if self.their_state is not h11.IDLE:
            self._searched = 0
        return event

    def _head_too_large(self) -> bool:
        # h11 0.16 keeps the unparsed bytes in `_receive_buffer._data` (h11 is pinned in app/requirements):
        # reading them in place spares a copy per event.
        pending = self._receive_buffer._data
        limit = self.max_head_bytes + 4  # the blank line itself is not counted
        if _BLANK_LINE.search(pending, max(0, self._searched - 2), limit) is not None:
            return False
        self._searched = min(len(pending), limit)
        return len(pending) > limit


class BoundedHeadH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a size cap and a time limit on each request's head."""

    # Set per server by `server_config` from Settings (their one home).
    header_timeout_s: float
    max_header_bytes: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = BoundedHeadConnection(self.max_header_bytes)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock: a connection that sends nothing is closed as well."""
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Stop the clock once the headers are in; start it with the first byte of the next head."""
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._header_timer is None and data:
                self._arm_header_timer()
        else:
            self._cancel_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the timer with the connection."""
        self._cancel_header_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """The answer to a request h11 cannot parse, in JSON (uvicorn's is plain text); 431 for a large head."""
        if self.conn.head_too_large:
            self._answer_and_close(
                "431 Request Header Fields Too Large", f"request headers larger than {self.max_header_bytes} bytes"
            )
        else:
            self._answer_and_close("400 Bad Request", "malformed HTTP request")

    def _answer_and_close(self, status: str, message: str) -> None:
        """Write a JSON error straight to the socket and close it (no request cycle owns it)."""
        self._cancel_header_timer()
        if self.transport.is_closing():
            return
        body = json.dumps({"error": message}).encode()
        head = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def server_config(app: Any, settings: Settings, **options: Any) -> uvicorn.Config:
    """The uvicorn Config every server of this service uses (`python -m app`, tests, benchmarks)."""
    protocol = type(
        "BoundedH11Protocol",
        (BoundedHeadH11Protocol,),
        {"header_timeout_s": settings.header_timeout_s, "max_header_bytes": settings.max_header_bytes},
    )
    return uvicorn.Config(
        app,
        http=protocol,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        timeout_keep_alive=settings.keep_alive_s,
        log_config=None,  # keep our JSON logging
        access_log=False,  # RequestLogMiddleware writes one line per request
        **options,
    )
