"""uvicorn with bounded requests and connections: head size and time, body time, open connections.

uvicorn's default protocol (httptools) accepts headers of any size, and neither of its protocols
limits how long a client may take to send its headers or body, or how many connections it holds,
so slow clients would hold connections, memory and file descriptors until none were left for the
probes. This serves with uvicorn's h11 protocol (uvicorn 0.54 `protocols/http/h11_impl.py`) and adds:

- Head size: h11's own `max_incomplete_event_size` only limits headers that are still incomplete
  after a read, so a large head that arrives in one read, or pipelined behind another request, would
  pass; the connection here measures each head in h11's buffer before h11 parses it (431 past
  MAX_HEADER_BYTES).
- Header count: a head with more than MAX_HEADER_COUNT fields gets a 431 too (many tiny fields cost more to
  parse and hold than their bytes suggest).
- Head time: a connection whose request line and headers are not complete within HEADER_TIMEOUT_S
  of its first byte (or of being opened) is closed.
- Body time: a request whose body is not complete within BODY_TIMEOUT_S of its headers gets a 408.
- Write time: a response whose client does not read (the socket's buffers full) for WRITE_TIMEOUT_S is cut:
  the connection is closed and the handler sees the client gone, so it lets go of what it holds.
- Connections: past MAX_CONNECTIONS the oldest connection that idles or is still sending its request
  is closed; if every other connection has a request in progress, a connection beyond the limit is
  served only for the probes (503 otherwise), so /health and /readiness always answer.

Protocol errors are answered in the service's JSON error shape (`server_config`'s `error_body`), not uvicorn's
plain text.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from common.probe_paths import HEALTH_PATH, READINESS_PATH
from common.settings import ServiceSettings, SettingsError

PROBE_PATHS = (HEALTH_PATH, READINESS_PATH)
DESCRIPTOR_RESERVE = 64
"""Open files kept for everything but connections: the listening socket, model files, logs, the jobs queue,
upstream connections."""
CUT_STATUS_STATE_KEY = "cut_status"
"""Where a request cut by the protocol (400, 408, 503) leaves its status in the ASGI scope's state, for the log."""

ErrorBody = Callable[[int, str], bytes]
"""A service's JSON error body for a status and a message."""


def plain_error_body(status: int, message: str) -> bytes:
    """The image service's error shape: `{"error": message}`."""
    return json.dumps({"error": message}).encode()


# h11 ends a head at the first blank line and accepts bare LF line ends (h11 0.16 `_receivebuffer.py`).
_BLANK_LINE = re.compile(b"\n\r?\n")


class BoundedHeadConnection(h11.Connection):
    """h11's server side, refusing a request head longer than `max_head_bytes` however it arrives.

    The bytes of the next head sit at the start of h11's receive buffer whenever the client's side
    is IDLE: sent in one read, dribbled, or pipelined behind the previous request (which a check in
    `data_received` would miss, since those bytes arrive while the previous request is in progress).
    """

    def __init__(self, max_head_bytes: int, max_header_count: int):
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        self.max_header_count = max_header_count
        self.head_refusal: str | None = None  # why a head got a 431
        self._searched = 0  # bytes of the current head already searched for its end

    def next_event(self) -> Any:
        """h11's next event, or RemoteProtocolError (hint 431) if the next head is too large or has too many
        fields."""
        if self.their_state is h11.IDLE and self._head_too_large():
            self.head_refusal = f"request headers larger than {self.max_head_bytes} bytes"
            raise h11.RemoteProtocolError("request headers too large", error_status_hint=431)
        event = super().next_event()
        if self.their_state is not h11.IDLE:
            self._searched = 0
        if isinstance(event, h11.Request) and len(event.headers) > self.max_header_count:
            self.head_refusal = f"more than {self.max_header_count} request header fields"
            raise h11.RemoteProtocolError("too many request headers", error_status_hint=431)
        return event

    def _head_too_large(self) -> bool:
        # h11 0.16 keeps the unparsed bytes in `_receive_buffer._data` (h11 is pinned in every service's lock):
        # reading them in place spares a copy per event.
        pending = self._receive_buffer._data
        limit = self.max_head_bytes + 4  # the blank line itself is not counted
        if _BLANK_LINE.search(pending, max(0, self._searched - 2), limit) is not None:
            return False
        self._searched = min(len(pending), limit)
        return len(pending) > limit


class BoundedHeadH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with bounds on each request's head and body and on open connections."""

    # Set per server by `server_config` from the settings (ServiceSettings, their one home).
    header_timeout_s: float
    max_header_bytes: int
    max_header_count: int
    body_timeout_s: float
    write_timeout_s: float
    max_connections: int
    error_body: ErrorBody
    open_connections: dict[BoundedHeadH11Protocol, None]  # this server's connections, oldest first

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = BoundedHeadConnection(self.max_header_bytes, self.max_header_count)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._paused_since: float | None = None  # when the transport last paused writing (None: not paused)
        self.app = self._serve_or_refuse(self.app)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Make room under MAX_CONNECTIONS, and start the clock: a connection that sends nothing is closed."""
        super().connection_made(transport)
        self.open_connections[self] = None
        self._make_room()
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Stop the clock once the headers are in; start it with the first byte of the next head."""
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._header_timer is None and data:
                self._arm_header_timer()
        else:
            self._cancel_header_timer()

    def handle_events(self) -> None:
        """h11's events, then the body clock: it runs while the client still owes a request body."""
        super().handle_events()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_too_slow)
        elif self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def pause_writing(self) -> None:
        """The client stopped reading (the transport's buffer is full): start the write clock.

        A fast stream to a slower reader pauses and resumes many times a second, so the clock is a timestamp
        and one timer per connection that checks it, not a timer made and cancelled at every pause."""
        super().pause_writing()
        self._paused_since = self.loop.time()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._check_reader)

    def resume_writing(self) -> None:
        """The client reads again: stop the write clock (its timer finds it stopped)."""
        self._paused_since = None
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the timers and the connection."""
        self._forget()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        """The connection becomes another protocol's: stop counting and timing it here."""
        self._forget()
        super().handle_websocket_upgrade(event)

    def send_400_response(self, msg: str) -> None:
        """The answer to a request h11 cannot parse, in JSON (uvicorn's is plain text); 431 for a large head."""
        status, message = "400 Bad Request", "malformed HTTP request"
        if self.conn.head_refusal is not None:
            status, message = "431 Request Header Fields Too Large", self.conn.head_refusal
        if self.cycle is not None and not self.cycle.response_complete:
            self._cut(status, message)  # a malformed body: its handler sees the client gone
        else:
            self._answer_and_close(status, message)

    def _forget(self) -> None:
        self._cancel_header_timer()
        self._cancel_write_timer()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self.open_connections.pop(self, None)

    def _waiting_on_client(self) -> bool:
        """True while the connection idles or the client is still sending its request (head or body)."""
        cycle = self.cycle
        if self.conn.their_state is h11.IDLE:
            return cycle is None or cycle.response_complete
        return self.conn.their_state is h11.SEND_BODY and not cycle.response_started

    def _make_room(self) -> bool:
        """Close the oldest connections waiting on their clients until at most MAX_CONNECTIONS are open;
        False if the connections that remain over the limit all have requests in progress."""
        excess = len(self.open_connections) - self.max_connections
        if excess <= 0:
            return True
        for other in list(self.open_connections):
            if other is not self and other._waiting_on_client():
                other._cut("503 Service Unavailable", "too many connections; retry")
                excess -= 1
                if excess <= 0:
                    return True
        return False

    def _serve_or_refuse(self, app: Any) -> Any:
        """The app, except that beyond MAX_CONNECTIONS only the probes are served."""

        async def serve(scope: Any, receive: Any, send: Any) -> None:
            if scope["path"] in PROBE_PATHS or self._make_room():
                await app(scope, receive, send)
                return
            body = self.error_body(503, "too many connections; retry")
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                (b"retry-after", b"1"),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return serve

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.conn.their_state is h11.SEND_BODY:
            self._cut("408 Request Timeout", f"the request body did not arrive within {self.body_timeout_s:g} s")

    def _cut(self, status: str, message: str) -> None:
        """Close this connection; a request whose answer has not started gets `status` first, and its
        handler sees the client gone (the request log shows `status`)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if not cycle.response_started:
                cycle.scope["state"][CUT_STATUS_STATE_KEY] = int(status.split()[0])
                self._answer_and_close(status, message)
            cycle.disconnected = True
            cycle.message_event.set()
        self._forget()
        if not self.transport.is_closing():
            self.transport.close()

    def _answer_and_close(self, status: str, message: str) -> None:
        """Write a JSON error straight to the socket and close it (no request cycle answers it)."""
        self._cancel_header_timer()
        if self.transport.is_closing():
            return
        body = self.error_body(int(status.split()[0]), message)
        head = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()

    def _check_reader(self) -> None:
        """Cut the connection if writing has been paused for WRITE_TIMEOUT_S; else wait for the rest of it (or,
        if writing flows again, stop checking)."""
        self._write_timer = None
        if self._paused_since is None:
            return
        waited = self.loop.time() - self._paused_since
        if waited < self.write_timeout_s:
            self._write_timer = self.loop.call_later(self.write_timeout_s - waited, self._check_reader)
            return
        self._client_not_reading()

    def _client_not_reading(self) -> None:
        """Cut a connection whose client has not read for WRITE_TIMEOUT_S. `abort`, not `close`: close would wait
        for the unread buffer to be sent first."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        self._forget()
        self.transport.abort()

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

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


def ensure_descriptors(settings: ServiceSettings) -> None:
    """Raise the open-file limit to what MAX_CONNECTIONS needs (up to the hard limit), or SettingsError."""
    needed = settings.max_connections + DESCRIPTOR_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SettingsError(
            f"MAX_CONNECTIONS={settings.max_connections} needs {needed} open files, but the limit is {hard} "
            "(ulimit -n): lower MAX_CONNECTIONS or raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def server_config(
    app: Any, settings: ServiceSettings, *, error_body: ErrorBody = plain_error_body, **options: Any
) -> uvicorn.Config:
    """The uvicorn Config every server uses (`python -m app`, `python -m llm_gateway`, tests, benchmarks); the
    protocol's own errors (400, 408, 431, 503) have `error_body`'s shape."""
    protocol = type(
        "BoundedH11Protocol",
        (BoundedHeadH11Protocol,),
        {
            "header_timeout_s": settings.header_timeout_s,
            "max_header_bytes": settings.max_header_bytes,
            "max_header_count": settings.max_header_count,
            "body_timeout_s": settings.body_timeout_s,
            "write_timeout_s": settings.write_timeout_s,
            "max_connections": settings.max_connections,
            "error_body": staticmethod(error_body),
            "open_connections": {},
        },
    )
    return uvicorn.Config(
        app,
        http=protocol,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        timeout_keep_alive=settings.keep_alive_s,
        log_config=None,  # keep our JSON logging
        access_log=False,  # each service logs one line per request itself
        **options,
    )
