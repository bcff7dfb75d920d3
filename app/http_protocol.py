"""uvicorn with bounded request headers: a size cap and a time limit for the headers to arrive.

uvicorn's default protocol (httptools) accepts headers of any size, and neither of its protocols
limits how long a client may take to send them, so slow or endless headers would hold connections
and memory. This serves with uvicorn's h11 protocol (uvicorn 0.54 `protocols/http/h11_impl.py`) and
adds both bounds. h11's own `max_incomplete_event_size` (passed from MAX_HEADER_BYTES) only limits
headers that are still incomplete after a read, so a large header that arrives in one read would
pass; the protocol here counts the bytes up to the blank line itself and answers 431 past
MAX_HEADER_BYTES. A connection whose request line and headers are not complete within
HEADER_TIMEOUT_S of its first byte (or of being opened) is closed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings


class BoundedHeadH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a size cap and a time limit on each request's head."""

    # Set per server by `server_config` from Settings (their one home).
    header_timeout_s: float
    max_header_bytes: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0  # bytes of the current request's head seen so far
        self._head_tail = b""  # the last bytes seen, in case the blank line spans two reads

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock: a connection that sends nothing is closed as well."""
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Count the head's bytes (431 past the limit); stop the clock once the headers are in."""
        if self.conn.their_state is h11.IDLE and not self._head_within_limit(data):
            self._refuse_head()
            return
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

    def _head_within_limit(self, data: bytes) -> bool:
        """Add `data` to the current head's count; False once it passes `max_header_bytes`."""
        window = self._head_tail + data
        end = window.find(b"\r\n\r\n")
        if end < 0:
            self._header_bytes += len(data)
            self._head_tail = window[-3:]
            return self._header_bytes <= self.max_header_bytes
        head = self._header_bytes + end + 4 - len(self._head_tail)
        self._header_bytes, self._head_tail = 0, b""  # the next request's head starts from zero
        return head <= self.max_header_bytes

    def _refuse_head(self) -> None:
        body = json.dumps({"error": f"request headers larger than {self.max_header_bytes} bytes"}).encode()
        head = (
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self._cancel_header_timer()
        if not self.transport.is_closing():
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
