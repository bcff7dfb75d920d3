"""The gateway's HTTP/1.1 client to vLLM: a keep-alive pool over asyncio protocols, and little else.

The gateway forwards every token of every stream through this client, so its cost per chunk is the gateway's
cost per token: measured on the pace stand-in (tools/gateway_overhead.py), httpx (httpcore, anyio) took about
half of the gateway's CPU. This client does only what the gateway asks of vLLM in its pod (over a Unix socket, or
loopback TCP): one request at a time per connection, a body sent whole, a response read as it comes, with

- a pool of kept-alive connections, each let go after `idle_s` without use (under the engine's own keep-alive,
  so a request is never sent on a connection the engine is closing) or when the response said `close`;
- a connect timeout, and a write timeout for the request (vLLM not reading it);
- responses framed by `content-length`, by chunked transfer coding (what vLLM's uvicorn streams with) or by the
  connection's end; a response head larger than MAX_HEAD_BYTES is a protocol error. The chunked coding, which a
  stream pays per token, is undone by llhttp (httptools, the C parser the servers run on) as the bytes arrive;
- backpressure: past READ_HIGH_WATER unread bytes the socket stops being read until the gateway catches up, so
  a client that reads slowly slows vLLM's socket, not the gateway's memory;
- cancellation: a response closed before its end closes its connection (vLLM aborts a request whose connection
  closes); only a response read to its end returns its connection to the pool.

No read timeout: a queued or long generation is not a failure; callers that want one (the probes) wrap the call
in `asyncio.timeout`, and a response abandoned that way closes its connection.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

from llm_gateway.engine_address import socket_path, socket_path_problem

MAX_HEAD_BYTES = 64 * 1024
READ_HIGH_WATER = 256 * 1024
READ_LOW_WATER = 64 * 1024
NO_BODY_STATUSES = frozenset({204, 304})
Relay = Callable[[bytes], bool]
"""Takes a piece of a chunked body in the event loop's read callback, as it arrives: True when it dealt with the
piece, False to hand the stream back to the task reading it (which then catches up on what the relay kept)."""
# What llhttp is told before a chunked body: it decodes a body only after a head, and ours was read already.
_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


class UpstreamError(Exception):
    """Any failure to get a whole answer from the upstream server."""


class ConnectError(UpstreamError):
    """No connection could be made (refused, unreachable): nothing of the request was sent."""


class ConnectTimeout(ConnectError):
    """No connection within the connect timeout: nothing of the request was sent."""


class WriteTimeout(UpstreamError):
    """The server did not take the request within the write timeout."""


class ReadError(UpstreamError):
    """The connection ended before the response did."""


class RemoteProtocolError(UpstreamError):
    """The server's answer is not HTTP/1.1 as this client reads it."""


class AnswerTooLarge(UpstreamError):
    """The server's answer (a whole body, or one event of a stream) is larger than the caller's bound: it is read no
    further, and its connection is closed."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"the engine's {what} is larger than {limit} bytes")


class ChunkedDecoder(Protocol):
    """A chunked body decoded as its bytes arrive: `_ChunkedBody` here, or llm_gateway/native's ChunkedBody, which
    decodes the same bodies to the same bytes and, given an EventRelay as `relay`, writes a stream's plain events
    to the client itself."""

    relay: object | None
    size: int
    done: bool
    trailing: bool
    error: RemoteProtocolError | None

    def feed(self, data: bytes) -> bool: ...

    def take(self) -> bytes: ...

    def close(self) -> None: ...


class _ChunkedBody:
    """A chunked body decoded as its bytes arrive: the pieces of data not yet read, and whether it has ended.

    Fed from the connection's data_received, so a token costs one call into llhttp, not a Python loop over the
    buffer. Bytes after the body's end (which one request at a time never has) mark the connection unusable."""

    relay: object | None = None  # only the native decoder writes events itself

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        # llhttp's per-chunk callback: a bound list.append is a C call, with no Python frame per token
        self.on_body = self.pieces.append
        # Bytes received since the last take, their chunk framing included: the flow control's measure, kept as
        # they come (summing the pieces on every read would cost a pass over all of them while a reader lags).
        self.size = 0
        self.done = False
        self.trailing = False
        self.error: RemoteProtocolError | None = None
        self._messages = 0
        self._parser: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self._parser.feed_data(_CHUNKED_HEAD)

    def feed(self, data: bytes) -> bool:
        """Decode `data`; a malformed chunk is kept as `error` (raised to the reader, not in the event loop). True
        when nothing is left for the reader now (the bytes were only framing)."""
        parser = self._parser
        if parser is None or self.done or self.error is not None:
            self.trailing = True
            return False
        self.size += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not self.trailing:
                self.error = RemoteProtocolError(f"a malformed chunked body: {exc}")
        return not self.pieces and not self.done and self.error is None

    def take(self) -> bytes:
        """The data decoded since the last call (raises the body's protocol error once its data is read)."""
        pieces = self.pieces
        if not pieces:
            if self.error is not None:
                raise self.error
            return b""
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()  # the same list: `on_body` appends to it
        self.size = 0
        return data

    def close(self) -> None:
        """Let go of the parser (it and this object refer to each other: without this, only the cyclic garbage
        collector would free them)."""
        self._parser = None

    # llhttp's callbacks
    def on_message_begin(self) -> None:
        self._messages += 1
        if self._messages > 1:  # bytes after the body's end: stop decoding them
            self.trailing = True
            raise RemoteProtocolError("bytes after the end of a chunked body")

    def on_message_complete(self) -> None:
        self.done = True


class _Connection(asyncio.Protocol):
    """One connection: the bytes received and not yet read, and the flow control both ways. With `native` (the
    compiled llm_gateway/native module), its reads go to native.Receiver, which feeds a native chunked body in C."""

    def __init__(self, native: ModuleType | None = None) -> None:
        self._native = native
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.body: ChunkedDecoder | None = None  # while a chunked body is read, bytes go to it, not to `buffer`
        self.relay: Relay | None = None  # set while a reader waits with one
        self.relay_stopped = False  # the relay handed the stream back
        self.relay_error: Exception | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._reading_paused = False

    # asyncio's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport (uvloop's is not a subclass)

    @property
    def data_received(self) -> Callable[[bytes], None]:  # type: ignore[override]
        """What the event loop calls with each read: `_received`, or the same in C (uvloop looks it up once, when the
        connection is made, so a read that a native body takes whole runs no Python at all)."""
        if self._native is not None:
            return cast(Callable[[bytes], None], self._native.Receiver(self).receive)
        return self._received

    def _received(self, data: bytes) -> None:
        body = self.body
        if body is None:
            self.buffer += data
            self._read(len(self.buffer))
            return
        try:
            if body.feed(data):
                return  # part of a chunk, or events the native decoder wrote: nothing to wake the reader for
        except Exception as exc:  # the native decoder's write: raised to the reader
            self._fed(body, exc)
            return
        self._fed(body, None)

    def _fed(self, body: ChunkedDecoder, error: Exception | None) -> None:
        """The rest of a read once `body` was fed and kept something for Python (`error`: what feeding raised): the
        relay takes the piece, or the reader is woken for it."""
        relay = self.relay
        if error is None:
            try:
                if relay is None or body.done or body.error is not None:
                    relay = None  # the reader takes this piece (the body's last, or its error)
                elif relay(body.take()):
                    return
            except Exception as exc:  # the relay's: raised to the reader
                error = exc
        if error is not None:
            self.relay_error = error
        if relay is not None:  # handed back: from here the reader takes every piece
            self.relay_stopped = True
            self.set_relay(None, None)
        self._read(body.size)

    def _read(self, unread: int) -> None:
        """Bytes came for the reader: stop reading the socket past the high water mark, and wake the reader."""
        if unread > READ_HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def set_relay(self, relay: Relay | None, native: object | None) -> None:
        """Hand the body's pieces to `relay` as they come (None: to the reader); `native`, the same relay's
        llm_gateway/native EventRelay, goes to a native decoder, which writes plain events itself."""
        self.relay = relay
        if self.body is not None and (native is not None or self.body.relay is not None):
            self.body.relay = native

    # the reader's side
    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait_for_data(self) -> None:
        """Return once more bytes have come or the connection has ended (ReadError if it had ended already)."""
        if self.closed:
            raise ReadError(f"the server closed the connection mid-response ({self.error or 'end of stream'})")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def consumed(self) -> None:
        """The reader took bytes from the buffer: read the socket again once the buffer is low."""
        unread = len(self.buffer) if self.body is None else self.body.size
        if self._reading_paused and unread <= READ_LOW_WATER and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()

    async def write(self, data: bytes, timeout_s: float) -> None:
        """Send `data`, waiting (at most `timeout_s`) while the socket's buffer is full."""
        assert self.transport is not None
        self.transport.write(data)
        if self._writable is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._writable
            except TimeoutError:
                raise WriteTimeout(f"the server took no request bytes for {timeout_s:g} s") from None
        if self.closed:
            raise ReadError(f"the server closed the connection ({self.error or 'end of stream'})")

    def close(self) -> None:
        """Close the connection now (an unfinished response: the server sees its client gone)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def usable(self, now: float, idle_s: float) -> bool:
        """Whether this idle connection may carry another request."""
        return not self.closed and not self.buffer and self.body is None and now - self.idle_since < idle_s


@dataclass
class Response:
    """A response whose head has been read; its body is read with `read` or `aiter_raw`, then `aclose`."""

    status_code: int
    headers: dict[str, str]  # lower-case names; a repeated field keeps its last value
    _connection: _Connection
    _pool: Upstream
    _length: int | None  # bytes of body left (content-length), or None
    _keep_alive: bool
    _body: ChunkedDecoder | None = None  # a chunked body's decoder
    _done: bool = False

    @property
    def complete(self) -> bool:
        """Whether the body's last piece has been taken: `next_piece` has nothing more to give."""
        return self._done

    async def read(self, max_bytes: int | None = None) -> bytes:
        """The whole body; AnswerTooLarge once it is longer than `max_bytes` (a content-length over it is refused
        before any of the body is read)."""
        if max_bytes is not None and self._length is not None and self._length > max_bytes:
            raise AnswerTooLarge("answer", max_bytes)
        parts: list[bytes] = []
        size = 0
        while (piece := await self.next_piece()) is not None:
            size += len(piece)
            if max_bytes is not None and size > max_bytes:
                raise AnswerTooLarge("answer", max_bytes)
            parts.append(piece)
        return b"".join(parts)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it comes, transfer coding removed: each piece is everything readable at that moment."""
        while (piece := await self.next_piece()) is not None:
            yield piece

    async def next_piece(
        self, wait_s: float | None = None, relay: Relay | None = None, native_relay: object | None = None
    ) -> bytes | None:
        """The body's next piece (everything readable now, transfer coding removed), or None after its end.

        With `wait_s`, TimeoutError when no piece came within that time; nothing is lost (what arrives later waits
        in the buffer for the next call). A coroutine, not an async generator: a token stream calls it once per
        token, and each generator layer costs a frame switch per piece.

        With `relay` (a chunked body), the pieces that arrive while this waits go to `relay` as they come, in the
        read callback, without waking this task; b"" returns when the relay hands the stream back. The body's last
        piece, and a piece already in when this is called, come back as usual. With both, TimeoutError when the
        relay has not handed the stream back within `wait_s` (whether or not it forwarded anything).

        `native_relay`, the same relay's llm_gateway/native EventRelay, is given to a native decoder while this
        waits: it writes the events `relay` would have written unchanged, and leaves the others to `relay`."""
        connection = self._connection
        if self._body is None:
            relay = native_relay = None
        while not self._done:
            piece = self._take()
            if self._done:
                self._release()  # before the last piece goes out: its reader may stop at it
            elif not piece:
                if connection.closed:
                    if self._length is None and self._body is None:
                        self._done = True  # a body framed by the connection's end
                        self._release()
                        return None
                    raise ReadError(f"the server closed the connection mid-response ({connection.error or 'eof'})")
                connection.set_relay(relay, native_relay)
                try:
                    if wait_s is None:
                        await connection.wait_for_data()
                    else:
                        async with asyncio.timeout(wait_s):
                            await connection.wait_for_data()
                except TimeoutError:
                    # The relay may have handed the stream back in the very turn the time ran out: that wins.
                    if relay is None or not (connection.relay_stopped or connection.relay_error is not None):
                        raise
                finally:
                    connection.set_relay(None, None)
                if relay is not None:
                    stopped, connection.relay_stopped = connection.relay_stopped, False
                    if connection.relay_error is not None:
                        error, connection.relay_error = connection.relay_error, None
                        raise error
                    if stopped:
                        return b""
                continue
            if piece:
                return piece
        return None

    def _take(self) -> bytes:
        """What the body has brought since the last call, decoded; sets `_done` at the body's end."""
        body = self._body
        if body is not None:
            piece = body.take()
            self._done = body.done
            self._connection.consumed()
            return piece
        buffer = self._connection.buffer
        if not buffer:
            return b""
        if self._length is None:
            piece = bytes(buffer)
            del buffer[:]
        else:
            piece = bytes(buffer[: self._length])
            del buffer[: self._length]
            self._length -= len(piece)
            self._done = self._length == 0
        self._connection.consumed()
        return piece

    def _release(self) -> None:
        trailing = self._body is not None and self._body.trailing
        if self._body is not None:
            self._body.close()
        self._connection.body = None
        if self._connection.buffer or trailing or not self._keep_alive:
            self._connection.close()
        else:
            self._pool.put_back(self._connection)

    async def aclose(self) -> None:
        """Let go of the response: a connection whose response was not read to its end is closed."""
        if not self._done:
            self._done = True
            self._connection.close()
            if self._body is not None:
                self._body.close()


class Upstream:
    """A pool of HTTP/1.1 connections to one server: `base_url` is http or https with host and port, or `unix:`
    and the path of the socket it listens on (vLLM's `--uds`); `native`, the compiled llm_gateway/native module,
    decodes chunked bodies instead of llhttp.

    Over a Unix socket each token costs the kernel less than over loopback TCP (no segments, no ACKs to send and
    process): the pods use one (docs/llm-serving.md has the figures)."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float,
        write_timeout_s: float = 30.0,
        idle_s: float = 4.0,
        max_idle: int = 64,
        native: ModuleType | None = None,
    ) -> None:
        self.socket_path = socket_path(base_url)
        if self.socket_path is not None:
            problem = socket_path_problem(base_url)
            if problem is not None:
                raise ValueError(problem)
            self.host, self.port, self._ssl, self._prefix = "localhost", 0, None, ""
            host_header = self.host
        else:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) or unix: URL: {base_url!r}")
            self.host = parts.hostname
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
            self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
            self._prefix = parts.path.rstrip("/")
            host_header = self.host if parts.port is None else f"{self.host}:{self.port}"
        self._host_line = f"host: {host_header}\r\naccept-encoding: identity\r\n".encode("latin-1")
        self.connect_timeout_s = connect_timeout_s
        self.write_timeout_s = write_timeout_s
        self.idle_s = idle_s
        self.max_idle = max_idle
        self._idle: list[_Connection] = []  # most recently used last
        self._closed = False
        self.native = native

    def _chunked(self) -> ChunkedDecoder:
        return _ChunkedBody() if self.native is None else self.native.ChunkedBody(RemoteProtocolError)

    async def get(self, path: str) -> Response:
        """GET `path` (callers bound its time with `asyncio.timeout` where they need to)."""
        return await self.request("GET", path)

    async def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Response:
        """Send a request and return its response once the head is in (the body still to read)."""
        head = [f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1"), self._host_line]
        for name, value in (headers or {}).items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"a header {name!r} with a line break")
            head.append(f"{name}: {value}\r\n".encode("latin-1"))
        if body is not None:
            head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"\r\n")
        message = b"".join(head) + (body or b"")
        connection = self._idle_connection() or await self._connect()
        try:
            await connection.write(message, self.write_timeout_s)
            return await self._read_head(connection, method)
        except BaseException:
            connection.close()
            raise

    def _idle_connection(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable(now, self.idle_s):
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        address = self.socket_path or f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if self.socket_path is not None:
                    _, connection = await loop.create_unix_connection(
                        lambda: _Connection(self.native), self.socket_path
                    )
                else:
                    _, connection = await loop.create_connection(
                        lambda: _Connection(self.native), self.host, self.port, ssl=self._ssl
                    )
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {address} within {self.connect_timeout_s:g} s") from None
        except OSError as exc:  # a socket path not there yet (FileNotFoundError) or not listening: no connection
            raise ConnectError(f"no connection to {address}: {exc}") from exc
        return connection

    async def _read_head(self, connection: _Connection, method: str) -> Response:
        buffer = connection.buffer
        searched = 0
        while True:
            end = buffer.find(b"\r\n\r\n", max(0, searched - 3))
            if end >= 0:
                break
            if len(buffer) > MAX_HEAD_BYTES:
                raise RemoteProtocolError(f"a response head longer than {MAX_HEAD_BYTES} bytes")
            searched = len(buffer)
            if connection.closed:
                raise ReadError(f"the server closed the connection without an answer ({connection.error or 'eof'})")
            await connection.wait_for_data()
        if end > MAX_HEAD_BYTES:
            raise RemoteProtocolError(f"a response head longer than {MAX_HEAD_BYTES} bytes")
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[: end + 4]
        connection.consumed()
        version, _, rest = lines[0].partition(" ")
        status_text = rest[:3]
        if version not in ("HTTP/1.1", "HTTP/1.0") or not status_text.isdigit():
            raise RemoteProtocolError(f"not an HTTP/1.1 status line: {lines[0][:64]!r}")
        status = int(status_text)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise RemoteProtocolError(f"a malformed header line: {line[:64]!r}")
            headers[name.lower()] = value.strip()
        if 100 <= status < 200:
            return await self._read_head(connection, method)  # an interim answer; the final one follows
        keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length: int | None = None
        if not chunked and "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise RemoteProtocolError(f"a bad content-length {headers['content-length'][:32]!r}") from None
            if length < 0:
                raise RemoteProtocolError("a negative content-length")
        if method == "HEAD" or status in NO_BODY_STATUSES:
            chunked, length = False, 0
        if not chunked and length is None:
            keep_alive = False  # the body ends with the connection
        response = Response(status, headers, connection, self, length, keep_alive, self._chunked() if chunked else None)
        if response._body is not None:
            # From here the connection's bytes go to the decoder; those that came with the head go first.
            connection.body = response._body
            if buffer:
                connection.body.feed(bytes(buffer))
                del buffer[:]
        if length == 0:
            response._done = True
            response._release()
        return response

    def put_back(self, connection: _Connection) -> None:
        """Keep a connection whose response was read to its end, for the next request."""
        if self._closed or connection.closed or len(self._idle) >= self.max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    async def aclose(self) -> None:
        """Close every idle connection; later returns are closed too."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()
