"""The gateway's HTTP/1.1 client to vLLM (llm_gateway/upstream.py) against a raw loopback server that answers
with exactly the bytes each test writes: framing, keep-alive, expiry, backpressure, cancellation, and errors. Each
test runs with both chunked decoders: llhttp's and the gateway's own in C (llm_gateway/native)."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Awaitable, Callable
from contextlib import suppress

import pytest
import uvloop

from llm_gateway.upstream import (
    READ_HIGH_WATER,
    ConnectError,
    ReadError,
    RemoteProtocolError,
    Upstream,
    WriteTimeout,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture(autouse=True, params=["llhttp", "native"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Upstream` in this module's tests, with the chunked decoder of the parameter."""
    if request.param == "native":
        module = request.getfixturevalue("relay_module")
        monkeypatch.setitem(globals(), "Upstream", functools.partial(globals()["Upstream"], native=module))


class Server:
    """A loopback server running `handler` per connection, counting connections and the requests' heads."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.heads: list[bytes] = []
        self.closed = asyncio.Event()  # set when a connection ends from the client's side
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        """One request's head and body (content-length), recorded."""
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return head + await reader.readexactly(length)


def answering(server_ref: list[Server], *answers: bytes, then_wait: bool = True) -> Handler:
    """A handler that answers each request on a connection with the next of `answers` (per connection)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await server_ref[0].read_request(reader)
            writer.write(answer)
            await writer.drain()
        if then_wait:
            await reader.read()  # until the client closes

    return handler


def run(test: Callable[[], Awaitable[None]]) -> None:
    """Run the async test on uvloop, as the gateway runs."""
    uvloop.run(test())


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + extra
        + b"content-length: %d\r\n\r\n" % len(body)
        + body
    )


def chunked(*pieces: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + body
        + (b"0\r\n\r\n")
    )


def test_a_content_length_body_is_read_and_the_connection_kept_for_the_next_request():
    async def test() -> None:
        ref: list[Server] = []
        async with Server(answering(ref, ok(b'{"a":1}'), ok(b'{"b":2}'))) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            first = await upstream.request("POST", "/v1/completions", b'{"x":1}', {"x-request-id": "r1"})
            assert (first.status_code, first.headers["content-type"]) == (200, "application/json")
            assert await first.read() == b'{"a":1}'
            second = await upstream.get("/v1/models")
            assert await second.read() == b'{"b":2}'
            assert server.connections == 1
            assert server.heads[0].startswith(b"POST /v1/completions HTTP/1.1\r\n")
            assert b"x-request-id: r1\r\n" in server.heads[0] and b"content-length: 7\r\n" in server.heads[0]
            assert server.heads[1].startswith(b"GET /v1/models HTTP/1.1\r\n")
            await upstream.aclose()

    run(test)


def test_a_chunked_stream_sent_byte_by_byte_arrives_whole_and_in_order():
    events = [b'data: {"i": %d}\n\n' % i for i in range(20)] + [b"data: [DONE]\n\n"]
    wire = chunked(*events)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        for i in range(len(wire)):
            writer.write(wire[i : i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        await ref[0].read_request(reader)
        writer.write(ok(b"again"))
        await reader.read()

    ref: list[Server] = []

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            response = await upstream.request("POST", "/v1/completions", b"{}")
            got = [piece async for piece in response.aiter_raw()]
            assert b"".join(got) == b"".join(events)
            again = await upstream.get("/health")  # the chunked body's end was found: the connection is reused
            assert await again.read() == b"again"
            assert server.connections == 1

    run(test)


def test_chunk_extensions_and_trailers_are_read_past_and_bytes_after_the_end_retire_the_connection():
    # Extensions and trailers are legal HTTP/1.1 (RFC 9112 7.1.1, 7.1.2); bytes after the last chunk are not: a
    # connection that carried them could answer the next request with them, so it is not reused.
    extended = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n"
    )
    with_extra = chunked(b"data: 1\n\n") + b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = [extended, with_extra] if ref[0].connections == 1 else [ok(b"fresh")]
        for answer in answers:
            await ref[0].read_request(reader)
            writer.write(answer)
        await reader.read()

    ref: list[Server] = []

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            assert await (await upstream.get("/a")).read() == b"hello world"
            assert await (await upstream.get("/b")).read() == b"data: 1\n\n"
            async with asyncio.timeout(5):  # a reused first connection has no answer left for it
                assert await (await upstream.get("/c")).read() == b"fresh"
            assert server.connections == 2

    run(test)


def test_a_relay_takes_the_pieces_as_they_arrive_and_hands_the_stream_back_when_it_says_so():
    pieces = [b"data: %d\n\n" % i for i in range(6)]
    go = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        wire = chunked(*pieces)
        head_end = wire.index(b"\r\n\r\n") + 4
        writer.write(wire[:head_end])
        position = head_end
        for piece in pieces:  # one chunk per write, as vLLM streams tokens
            await go.wait()
            go.clear()
            size = len(b"%x\r\n%s\r\n" % (len(piece), piece))
            writer.write(wire[position : position + size])
            position += size
        await go.wait()
        writer.write(wire[position:])  # the last chunk
        await reader.read()

    ref: list[Server] = []
    relayed: list[bytes] = []

    def relay(piece: bytes) -> bool:
        relayed.append(piece)
        if piece == pieces[2]:
            return False  # hand the stream back
        if piece == pieces[4]:
            raise ValueError("the relay failed")
        return True

    async def feed_until(count: int) -> None:
        while len(relayed) < count:
            go.set()
            await asyncio.sleep(0.01)

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            response = await Upstream(server.url, connect_timeout_s=2).get("/stream")
            feeding = asyncio.ensure_future(feed_until(3))
            assert await response.next_piece(relay=relay) == b""  # handed back after the third piece
            await feeding
            assert relayed == pieces[:3]
            feeding = asyncio.ensure_future(feed_until(5))
            with pytest.raises(ValueError, match="the relay failed"):
                await response.next_piece(relay=relay)
            await feeding
            assert relayed == pieces[:5]
            go.set()
            assert await response.next_piece() == pieces[5]  # without a relay, pieces come back as before
            go.set()
            assert await response.next_piece(relay=relay) is None  # the end wakes the reader
            assert relayed == pieces[:5]

    run(test)


def test_a_relay_with_a_wait_times_out_unless_it_hands_the_stream_back():
    pieces = [b"data: first\n\n", b"data: second\n\n"]
    go = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in pieces:
            await go.wait()
            go.clear()
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await reader.read()

    ref: list[Server] = []
    relayed: list[bytes] = []

    def relay(piece: bytes) -> bool:
        relayed.append(piece)
        return piece != pieces[1]  # the second is handed back

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            response = await Upstream(server.url, connect_timeout_s=2).get("/stream")
            with pytest.raises(TimeoutError):  # nothing came
                await response.next_piece(0.1, relay=relay)
            go.set()
            with pytest.raises(TimeoutError):  # a piece relayed is not a piece handed back: the wait goes on
                await response.next_piece(0.3, relay=relay)
            assert relayed == pieces[:1]
            go.set()
            assert await response.next_piece(5, relay=relay) == b""  # handed back, long before the 5 s
            assert relayed == pieces

    run(test)


def test_an_idle_connection_is_dropped_after_idle_s_and_a_new_one_opened():
    async def test() -> None:
        ref: list[Server] = []
        async with Server(answering(ref, ok(b"1"))) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2, idle_s=0.2)
            assert await (await upstream.get("/a")).read() == b"1"
            await asyncio.sleep(0.4)
            assert await (await upstream.get("/b")).read() == b"1"
            assert server.connections == 2
            await upstream.aclose()

    run(test)


def test_a_response_that_says_close_or_has_no_length_is_not_reused():
    async def test() -> None:
        ref: list[Server] = []
        close = ok(b"c", b"connection: close\r\n")
        until_eof = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"
        async with Server(answering(ref, close, until_eof, then_wait=False)) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            assert await (await upstream.get("/a")).read() == b"c"
            assert server.connections == 1
            response = await upstream.get("/a")  # a new connection; it answers `close` again
            assert await response.read() == b"c"
            assert server.connections == 2

    run(test)

    async def eof_framed() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await ref[0].read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")
            writer.close()

        ref: list[Server] = []
        async with Server(handler) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            assert await (await upstream.get("/a")).read() == b"until the end"

    run(eof_framed)


def test_closing_a_stream_half_way_closes_its_connection():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        assert await reader.read() == b""  # the client closed: what vLLM takes as an abort

    ref: list[Server] = []

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            response = await upstream.request("POST", "/v1/completions", b"{}")

            async def read_all() -> None:
                async for _ in response.aiter_raw():
                    pass

            reading = asyncio.create_task(read_all())
            await asyncio.sleep(0.1)
            reading.cancel()
            with suppress(asyncio.CancelledError):
                await reading
            await response.aclose()
            await asyncio.wait_for(server.closed.wait(), 2)

    run(test)


def test_a_reader_that_stops_reading_stops_the_socket_being_read():
    big = b"x" * (READ_HIGH_WATER * 8)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(ok(big))
        with suppress(ConnectionError):
            await writer.drain()
        await reader.read()

    ref: list[Server] = []

    async def test() -> None:
        async with Server(handler) as server:
            ref.append(server)
            upstream = Upstream(server.url, connect_timeout_s=2)
            response = await upstream.get("/big")
            await asyncio.sleep(0.3)  # the server writes; nobody reads the response
            held = len(response._connection.buffer)
            assert held <= READ_HIGH_WATER + 512 * 1024, held  # paused past the high water (plus one socket read)
            assert len(await response.read()) == len(big)  # reading resumes the socket

    run(test)


def test_failures_raise_the_upstream_errors_the_gateway_answers():
    async def bad_chunk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n")
        await reader.read()

    async def huge_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * 100_000 + b"\r\n\r\n")
        await reader.read()

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
        writer.close()

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await reader.read()

    ref: list[Server] = []

    async def expect(handler: Handler, error: type[Exception]) -> None:
        async with Server(handler) as server:
            ref[:] = [server]
            upstream = Upstream(server.url, connect_timeout_s=2)
            with pytest.raises(error):
                response = await upstream.get("/x")
                await response.read()

    async def test() -> None:
        await expect(bad_chunk, RemoteProtocolError)
        await expect(huge_head, RemoteProtocolError)
        await expect(hang_up, ReadError)
        await expect(not_http, RemoteProtocolError)
        with socket.socket() as unused:  # a port nobody listens on
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        with pytest.raises(ConnectError):
            await Upstream(f"http://127.0.0.1:{port}", connect_timeout_s=2).get("/x")
        with pytest.raises(ValueError, match="line break"):
            await Upstream(f"http://127.0.0.1:{port}", connect_timeout_s=2).request(
                "POST", "/x", b"", {"x-request-id": "a\r\nx-evil: 1"}
            )

    run(test)


def test_a_server_that_does_not_read_the_request_is_a_write_timeout():
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3)

    async def test() -> None:
        async with Server(deaf) as server:
            upstream = Upstream(server.url, connect_timeout_s=2, write_timeout_s=0.3)
            with pytest.raises(WriteTimeout):
                await upstream.request("POST", "/x", b"x" * 64 * 1024 * 1024)

    run(test)
