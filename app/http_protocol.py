"""uvicorn with bounded request headers: a size cap and a time limit for the headers to arrive.

uvicorn's default protocol (httptools) accepts headers of any size, and neither of its protocols
limits how long a client may take to send them, so slow or endless headers would hold connections
and memory. This serves with uvicorn's h11 protocol, whose parser refuses headers larger than
`h11_max_incomplete_event_size` (uvicorn 0.54 `config.py`, `protocols/http/h11_impl.py`), and adds
the missing timer: a connection whose request line and headers are not complete within
HEADER_TIMEOUT_S of its first byte (or of being opened) is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections that do not finish their headers in time."""

    header_timeout_s: float = 10.0  # set per server by `server_config`

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock: a connection that sends nothing is closed as well."""
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Stop the clock once a request's headers are in; start it when the next request begins."""
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
    protocol = type("BoundedH11Protocol", (HeaderTimeoutH11Protocol,), {"header_timeout_s": settings.header_timeout_s})
    return uvicorn.Config(
        app,
        http=protocol,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        log_config=None,  # keep our JSON logging
        access_log=False,  # RequestLogMiddleware writes one line per request
        **options,
    )
