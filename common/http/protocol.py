"""uvicorn with bounded requests and connections: head size, field count and time, body time, write time, open
connections.

uvicorn's protocols accept headers of any size, and neither limits how long a client may take to send its headers
or body, or how many connections it holds, so slow clients would hold connections, memory and file descriptors
until none were left for the probes. This serves with uvicorn's httptools protocol (uvicorn 0.54
`protocols/http/httptools_impl.py`; llhttp parses in C, which `python -m tools.gateway_overhead` measured at a
third of h11's added time to first token at 64 streams) and adds:

- Head size: the request line and headers are counted as llhttp reports them, and the raw bytes of a head still
  incomplete after a read are counted too (llhttp buffers a field until its end), so a head over MAX_HEADER_BYTES
  gets a 431 whether it arrives in one read, dribbled, or pipelined behind another request.
- Header count: a head with more than MAX_HEADER_COUNT fields gets a 431 too (many tiny fields cost more to parse
  and hold than their bytes suggest).
- Trailers: llhttp reports the trailer fields after a chunked body through the same callbacks as a head's, so the
  trailer section is bounded as a head is (MAX_HEADER_BYTES, a field that never ends included, and
  MAX_HEADER_COUNT: a 431), and its fields are then dropped (RFC 9112 section 7.1.2 lets a recipient discard them;
  nothing here reads them). uvicorn would append them to the request's headers while the app runs, which RFC 9110
  section 6.5.1 forbids: a trailer could add a field the app reads later. Its time is the body's.
- Host: an HTTP/1.1 request without a Host field, and any request with two or with an invalid value, gets a 400
  (RFC 9112 section 3.2); an HTTP/1.0 request without one is served, as that section asks Host only of HTTP/1.1.
- Upgrades: a request to switch protocols (a WebSocket handshake, h2c) or a CONNECT gets a 400 and the connection is
  closed: no service here serves another protocol (the Gradio UI uses none), and llhttp stops parsing HTTP at such a
  head (an upgrade's body is left unread), so it cannot be served as plain HTTP/1.1 either.
- Head time: a connection whose request line and headers are not complete within HEADER_TIMEOUT_S of its first
  byte (or of being opened) is closed.
- Body time: a request whose body is not complete within BODY_TIMEOUT_S of its headers gets a 408.
- Write time: a response whose client does not read (the socket's buffers full) for WRITE_TIMEOUT_S is cut: the
  connection is closed and the handler sees the client gone, so it lets go of what it holds.
- Connections: past MAX_CONNECTIONS the oldest connection that idles or is still sending its request is closed; if
  every other connection has a request in progress, a connection beyond the limit is served only for the probes
  (503 otherwise), so /health and /readiness always answer.
- Only HTTP/1.0 and 1.1: llhttp parses an HTTP/0.9 request line, which gets a 400 here.

A streamed response may also write its body without awaiting `send`: scope["extensions"][BODY_NOWAIT] is a
`BodyNowait`, a callable that writes one piece of a started chunked body now and returns True, or returns False
(writing nothing) when the piece must go through `send` (the client is not reading, or has gone), which keeps the
write bound. The LLM gateway writes each token so: no coroutine and no timer per token, a wait only when the
client's socket is full.

Protocol errors are answered in the service's JSON error shape (`server_config`'s `error_body`), not uvicorn's
plain text. A head refused behind a pipelined request is answered after that request's response.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
from collections.abc import Callable
from typing import Any

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from common.probe_paths import HEALTH_PATH, READINESS_PATH
from common.settings import ServiceSettings, SettingsError

PROBE_PATHS = (HEALTH_PATH, READINESS_PATH)
DESCRIPTOR_RESERVE = 64
"""Open files kept for everything but connections: the listening socket, model files, logs, the jobs queue."""
CUT_STATUS_STATE_KEY = "cut_status"
"""Where a request cut by the protocol (400, 408, 503) leaves its status in the ASGI scope's state, for the log."""
HTTP_VERSIONS = ("1.0", "1.1")
HOST_VALUE = re.compile(rb"(\[[0-9A-Za-z._~!$&'()*+,;=:-]*\]|[0-9A-Za-z._~%!$&'()*+,;=-]*)(:[0-9]*)?")
"""A Host field's value: uri-host [ ":" port ] (RFC 9110 section 7.2, RFC 3986 section 3.2.2); empty is allowed."""

BODY_NOWAIT = "common.http.body_nowait"
"""The scope extension under which a request finds its `BodyNowait`."""

ErrorBody = Callable[[int, str], bytes]
"""A service's JSON error body for a status and a message."""


def plain_error_body(status: int, message: str) -> bytes:
    """The image service's error shape: `{"error": message}`."""
    return json.dumps({"error": message}).encode()


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a head the protocol refuses (its answer is set beforehand)."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounds on each request's head and body and on open connections."""

    # Set per server by `server_config` from the settings (ServiceSettings, their one home).
    header_timeout_s: float
    max_header_bytes: int
    max_header_count: int
    body_timeout_s: float
    write_timeout_s: float
    max_connections: int
    error_body: ErrorBody
    open_connections: dict[BoundedHttpToolsProtocol, None]  # this server's connections, oldest first

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_body = False  # the current request's body is still due (otherwise the next bytes are a head)
        self._head_open = False  # llhttp has begun a head and not finished it
        self._head_bytes = 0  # bytes of the current head's finished fields, as llhttp reports them
        self._raw_head_bytes = 0  # bytes of the reads that ended with the current head still open
        self._header_count = 0
        self._last_chunk_may_open = False  # a chunk-size line came with no data yet: perhaps the last, trailers next
        self._chunk_line_this_read = False  # that chunk-size line came in the read being parsed
        self._refusal: tuple[str, str] | None = None  # the answer to the head being refused
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
        """Parse `data`; start the head clock with the first byte of a head, and count a head still open after it."""
        if self.transport.is_closing():
            return
        if not self._in_body and self._header_timer is None and data:
            self._arm_header_timer()
        self._unset_keepalive_if_required()
        self._chunk_line_this_read = False
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            # An upgrade is refused at its head (on_headers_complete), so llhttp never gets to signal one.
            refusal, self._refusal = self._refusal, None
            status, message = refusal or ("400 Bad Request", "malformed HTTP request")
            self._refuse(status, message)
            return
        # llhttp buffers a field until its end, so a field that never ends is seen only here, in the raw bytes.
        if self._head_open:
            # The part of this read before the head began counts too, which errs on the side of refusing.
            self._raw_head_bytes += len(data)
        elif self._last_chunk_may_open:
            # In the read that brought the chunk-size line, only its unfinished last line is a trailer field still
            # open (before it: body, the chunk-size line, finished fields, which on_header counted); after that
            # read, every byte is the trailer section's.
            self._raw_head_bytes += len(data) - data.rfind(b"\n") - 1 if self._chunk_line_this_read else len(data)
        else:
            return
        if self._raw_head_bytes > self.max_header_bytes:
            self._refuse("431 Request Header Fields Too Large", self._too_large())

    # Parser callbacks
    def on_message_begin(self) -> None:
        """A new head: its counts start at zero."""
        super().on_message_begin()
        self._head_open = True
        self._head_bytes = self._raw_head_bytes = self._header_count = 0

    def on_url(self, url: bytes) -> None:
        """Count the request target against MAX_HEADER_BYTES."""
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count the field against MAX_HEADER_BYTES and MAX_HEADER_COUNT; a trailer field (llhttp reports one after
        the body) is counted the same way, then dropped."""
        self._header_count += 1
        if self._header_count > self.max_header_count:
            self._refusal = (
                "431 Request Header Fields Too Large",
                f"more than {self.max_header_count} request {self._section()} fields",
            )
            raise _Refused
        self._count(len(name) + len(value) + 4)
        if not self._in_body:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Stop the head clock; refuse HTTP/0.9, a missing, repeated or invalid Host, and upgrades; start the body
        clock (stopped again at once without a body), and the trailer section's counts."""
        self._head_open = False
        self._cancel_header_timer()
        refusal = self._head_refusal()
        if refusal is not None:
            self._refusal = ("400 Bad Request", refusal)
            raise _Refused
        super().on_headers_complete()
        self._in_body = True
        self._head_bytes = self._raw_head_bytes = self._header_count = 0
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_too_slow)

    def on_chunk_header(self) -> None:
        """A chunk-size line: if it is the last chunk's, a trailer section follows, counted until it ends."""
        self._last_chunk_may_open = self._chunk_line_this_read = True
        self._raw_head_bytes = 0

    def on_body(self, body: bytes) -> None:
        """Body bytes: the chunk being read is not the last."""
        self._last_chunk_may_open = False
        super().on_body(body)

    def on_chunk_complete(self) -> None:
        """A chunk (or the trailer section, after the last) is over."""
        self._last_chunk_may_open = False

    def on_message_complete(self) -> None:
        """The request is in: stop the body clock; the next bytes are a new head."""
        self._in_body = self._last_chunk_may_open = False
        self._cancel_body_timer()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """After the last pipelined request's answer, answer the head refused behind it."""
        another = bool(self.pipeline)  # uvicorn starts the next pipelined request now
        super().on_response_complete()
        if self._refusal is not None and not another:
            status, message = self._refusal
            self._answer_and_close(status, message)

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

    def _head_refusal(self) -> str | None:
        """Why the head just parsed is refused (a 400), or None."""
        version = self.parser.get_http_version()
        if version not in HTTP_VERSIONS:
            return "HTTP/1.0 or HTTP/1.1 only"
        hosts = [value for name, value in self.headers if name == b"host"]
        if len(hosts) > 1:
            return "more than one Host header field"
        if not hosts and version == "1.1":
            return "an HTTP/1.1 request needs a Host header field"
        if hosts and HOST_VALUE.fullmatch(hosts[0]) is None:
            return "the Host header field is not a host name or address with an optional port"
        if self.parser.should_upgrade():  # an Upgrade named in Connection, or CONNECT
            upgrade = self._get_upgrade()
            asked = f"an upgrade to {upgrade[:40].decode('latin-1')}" if upgrade else self.parser.get_method().decode()
            return f"{asked} is not served here: this server speaks plain HTTP/1.1 only"
        return None

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            self._refusal = ("431 Request Header Fields Too Large", self._too_large())
            raise _Refused

    def _section(self) -> str:
        """What is being counted: the head's fields, or the trailer section's after a chunked body."""
        return "trailer" if self._in_body else "header"

    def _too_large(self) -> str:
        return f"request {self._section()}s larger than {self.max_header_bytes} bytes"

    def _refuse(self, status: str, message: str) -> None:
        """Answer a request the protocol will not serve and close. A bad body (or trailer section) cuts its own
        request, answered if its answer has not started; a bad head behind a request still being answered waits for
        that answer (parsing stops here)."""
        self._cancel_header_timer()
        if self._in_body:
            self._cut(status, message)
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            self._refusal = (status, message)
            self.flow.pause_reading()
            return
        self._answer_and_close(status, message)

    def _forget(self) -> None:
        self._cancel_header_timer()
        self._cancel_write_timer()
        self._cancel_body_timer()
        self.open_connections.pop(self, None)

    def _waiting_on_client(self) -> bool:
        """True while the connection idles or the client is still sending its request (head or body)."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return True
        return self._in_body and not cycle.response_started

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
                cycle = getattr(send, "__self__", None)  # uvicorn's RequestResponseCycle, whose send this is
                if cycle is not None:
                    scope.setdefault("extensions", {})[BODY_NOWAIT] = BodyNowait(cycle)
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
        if self._in_body:
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

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self._in_body and not self.transport.is_closing():
            self.transport.close()


class BodyNowait:
    """`cycle`'s write of a body piece without awaiting: what uvicorn 0.54's `RequestResponseCycle.send` does for a
    chunked `http.response.body` with `more_body`, when it would not wait either (the socket takes bytes, the client
    is there, the head went out). Otherwise False, and the caller awaits `send`, which waits under the write bound."""

    __slots__ = ("_cycle", "_flow", "_head", "_transport")

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._flow = cycle.flow
        self._transport = cycle.transport
        self._head = cycle.scope["method"] == "HEAD"  # uvicorn sends no body for HEAD, whatever the app says

    def __call__(self, piece: bytes) -> bool:
        """Write `piece` as one chunk now: True, or False (nothing written) when it must go through `send`."""
        cycle = self._cycle
        if not piece:
            return True  # an empty chunk would end the body
        if (
            self._head
            or self._flow.write_paused
            or cycle.disconnected
            or cycle.response_complete
            or not cycle.response_started
            or not cycle.chunked_encoding
        ):
            return False
        self._transport.write(b"%x\r\n%b\r\n" % (len(piece), piece))
        return True


def ensure_descriptors(settings: ServiceSettings, upstream_connections: int = 0) -> None:
    """Raise the open-file limit to what MAX_CONNECTIONS needs, plus the most connections the service opens to what
    it forwards to (`upstream_connections`: the gateway's to vLLM, the starting gate's to its pool), up to the hard
    limit, or SettingsError."""
    needed = settings.max_connections + upstream_connections + DESCRIPTOR_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        upstream = f" and {upstream_connections} upstream connections need" if upstream_connections else " needs"
        raise SettingsError(
            f"MAX_CONNECTIONS={settings.max_connections}{upstream} {needed} open files, but the limit is "
            f"{hard} (ulimit -n): lower MAX_CONNECTIONS or raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def server_config(
    app: Any, settings: ServiceSettings, *, error_body: ErrorBody = plain_error_body, **options: Any
) -> uvicorn.Config:
    """The uvicorn Config every server uses (`python -m app`, `python -m llm_gateway`, tests, benchmarks); the
    protocol's own errors (400, 408, 431, 503) have `error_body`'s shape."""
    protocol = type(
        "BoundedProtocol",
        (BoundedHttpToolsProtocol,),
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
        timeout_keep_alive=settings.keep_alive_s,
        log_config=None,  # keep our JSON logging
        access_log=False,  # each service logs one line per request itself
        ws="none",  # upgrades are refused (the protocol's _head_refusal), whatever WebSocket library is installed
        **options,
    )
