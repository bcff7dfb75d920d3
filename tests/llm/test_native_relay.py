"""The gateway's relay in C (llm_gateway/native) gives the answers of the Python path it stands in for: its decoder
reads every chunked body llhttp reads to the same bytes (and refuses what llhttp refuses), and a client gets the
same stream through the gateway with NATIVE_RELAY on and off, usage chunks, Responses events and split events
included. The module is built here as `make test` and the image build it (`python -m llm_gateway.native.build`)."""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from common.http.protocol import BodyNowait
from llm_gateway import native
from llm_gateway.gateway import _StreamRelay
from llm_gateway.upstream import RemoteProtocolError, _ChunkedBody, _Connection
from llm_gateway.usage import EventStream, RequestRecord
from tests.llm.stack import run_gateway
from tests.support.fake_server import FakeServer, QuietHandler

# -- the decoder -----------------------------------------------------------------------------------------------


def decode(body: Any, wire: bytes, cuts: list[int]) -> tuple[bytes, bool, bool, bool, list[int]]:
    """Feed `wire` to `body` in pieces cut at `cuts`: the data read, done, trailing, an error, the sizes seen."""
    data, sizes, failed = b"", [], False
    bounds = [0, *cuts, len(wire)]
    for start, end in itertools.pairwise(bounds):
        body.feed(wire[start:end])
        sizes.append(body.size)
        try:
            data += body.take()
        except RemoteProtocolError:
            failed = True
    return data, body.done, body.trailing, failed or body.error is not None, sizes


def random_body(rng: random.Random) -> tuple[bytes, bytes]:
    """A valid chunked body (its wire bytes, its data) with the forms RFC 9112 allows: any data (CRLFs and
    `0\\r\\n\\r\\n` inside), sizes in either case and with leading zeros, extensions, trailers."""
    wire, data = b"", b""
    for _ in range(rng.randint(0, 6)):
        piece = bytes(rng.choice(b'data: {"x":1}\r\n0\r\n\r\n\n\n}') for _ in range(rng.randint(1, 300)))
        size = f"{len(piece):x}"
        size = rng.choice([size, size.upper(), "0" * rng.randint(1, 18) + size])
        extension = rng.choice(["", "", ";name=value", ";a;b=c", ';q="a \\"quoted\\" value"', ";empty="])
        wire += f"{size}{extension}\r\n".encode() + piece + b"\r\n"
        data += piece
    wire += b"0" + rng.choice([b"", b";last=1"]) + b"\r\n"
    wire += rng.choice([b"", b"x-trailer: 1\r\n", b"a: 1\r\nb:2\r\n", b"empty:\r\n"]) + b"\r\n"
    return wire, data


def test_the_native_decoder_reads_every_body_as_llhttp_does_however_it_is_cut(relay_module: ModuleType) -> None:
    rng = random.Random(20261127)  # noqa: S311 - reproducible bodies, not a secret
    for _ in range(400):
        wire, data = random_body(rng)
        cuts = sorted(rng.sample(range(1, len(wire)), min(len(wire) - 1, rng.randint(0, 12))))
        native_result = decode(relay_module.ChunkedBody(RemoteProtocolError), wire, cuts)
        assert native_result == decode(_ChunkedBody(), wire, cuts), (wire, cuts)
        assert native_result[:4] == (data, True, False, False)


@pytest.mark.parametrize(
    "wire",
    [
        b"zz\r\nhello\r\n0\r\n\r\n",  # not a size
        b"5\nhello\r\n0\r\n\r\n",  # a bare LF after the size
        b"5\r\nhelloXY0\r\n\r\n",  # no CRLF after the data
        b"5\r\nhello\n0\r\n\r\n",
        b"1" * 20 + b"\r\n",  # a size past 64 bits
        b"-1\r\n",
        b"\r\n",  # a size with no digits
        b"0\r\n\r\r",  # no LF at the end
        b"5;a b\r\nhello\r\n0\r\n\r\n",  # spaces in an extension
        b"5; a=b\r\nhello\r\n0\r\n\r\n",
        b"5;a=b \r\nhello\r\n0\r\n\r\n",
        b'5;a="x\r\nhello\r\n0\r\n\r\n',  # an unterminated quoted value
        b"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",  # a trailer that is not a field
        b"5\r\nhello\r\n0\r\nx : y\r\n\r\n",
        b"5\r\nhello\r\n0\r\nx: a\r\n b\r\n\r\n",  # a folded trailer
        b"5\r\nhello\r\n0\r\nx:\x00\r\n\r\n",
    ],
    ids=[
        "not-hex",
        "bare-lf",
        "no-crlf",
        "lf-only",
        "overflow",
        "negative",
        "empty-size",
        "bad-end",
        "ext-space",
        "ext-leading-space",
        "ext-trailing-space",
        "ext-open-quote",
        "trailer-no-colon",
        "trailer-space-before-colon",
        "trailer-folded",
        "trailer-nul",
    ],
)
def test_a_malformed_body_is_a_protocol_error_for_both_decoders(relay_module: ModuleType, wire: bytes) -> None:
    for body in (relay_module.ChunkedBody(RemoteProtocolError), _ChunkedBody()):
        *_, failed, _ = decode(body, wire, [])
        assert failed, (type(body).__name__, wire)
        assert isinstance(body.error, RemoteProtocolError)
        assert str(body.error).startswith("a malformed chunked body")
        body.feed(b"more")  # later bytes are not decoded: the connection is retired
        assert body.trailing


def test_bytes_after_the_end_retire_the_connection_for_both_decoders(relay_module: ModuleType) -> None:
    wire = b"5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"
    for body in (relay_module.ChunkedBody(RemoteProtocolError), _ChunkedBody()):
        assert decode(body, wire, [7]) == (b"hello", True, True, False, [7, len(wire) - 7])


# -- the relay, in the read callback ----------------------------------------------------------------------------


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


class Flow:
    write_paused = False


class Cycle:
    """uvicorn's request cycle, as far as BodyNowait reads it."""

    def __init__(self) -> None:
        self.transport, self.flow = Transport(), Flow()
        self.scope = {"method": "POST"}
        self.disconnected = self.response_complete = False
        self.response_started = self.chunked_encoding = True


def event(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode()


USAGE_ONLY = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'


def frame(*events: bytes) -> bytes:
    payload = b"".join(events)
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stream:
    """A stream as the gateway relays it: the upstream connection (whose reads go to native.Receiver) with the native
    decoder and the gateway's relay (`_StreamRelay`, whose EventRelay writes through BodyNowait's parts) on a
    stand-in request cycle; `read` is one socket read, as the event loop hands it to the connection."""

    def __init__(self, module: ModuleType) -> None:
        self.record = RequestRecord("/v1/chat/completions", "m", True)
        self.events = EventStream(self.record, client_wants_usage=False)
        self.cycle = Cycle()
        self.relay = _StreamRelay(self.events, self.record, BodyNowait(self.cycle), module)
        self.body = module.ChunkedBody(RemoteProtocolError)
        self.connection = _Connection(module)
        self.connection.body = self.body
        self.connection.set_relay(self.relay, self.relay.native)
        self.python_reads = 0  # reads whose rest ran in Python (`_Connection._fed`)
        fed = self.connection._fed

        def counted(body: Any, error: Exception | None) -> None:
            self.python_reads += 1
            fed(body, error)

        self.connection._fed = counted  # type: ignore[method-assign]
        self.receive = self.connection.data_received  # what uvloop takes when the connection is made

    @property
    def written(self) -> list[bytes]:
        return self.cycle.transport.written

    def read(self, wire: bytes) -> str:
        """'native': the decoder wrote it and no Python ran; 'python': the Python relay took it; 'reader': handed
        back."""
        before = self.python_reads
        self.receive(wire)
        if self.python_reads == before:
            return "native"
        return "reader" if self.connection.relay_stopped else "python"


def test_plain_events_after_the_first_token_are_written_in_the_read_callback(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    assert stream.read(frame(event("a"))) == "python"  # the first token: the Python relay stamps and writes it
    assert stream.record.first_event_at is not None and stream.relay.forwarded
    assert stream.read(frame(event("b"), event("c"))) == "native"
    assert stream.written == [frame(event("a")), frame(event("b"), event("c"))] and stream.body.size == 0
    stream.cycle.flow.write_paused = True  # a client that is not reading: the bounded `send` waits for it
    assert stream.read(frame(event("d"))) == "reader"
    assert stream.relay.pending == event("d") and len(stream.written) == 2


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (frame(event("b"))[:-6], "a piece that ends mid-event"),
        (frame(USAGE_ONLY), "a usage chunk"),
        (frame(b"data: [DONE]\n\n"), "the last event"),
        (frame(event("b")) + b"0\r\n\r\n", "the body's end"),
    ],
)
def test_other_pieces_are_left_to_the_python_relay(relay_module: ModuleType, wire: bytes, why: str) -> None:
    stream = Stream(relay_module)
    stream.read(frame(event("a")))
    assert stream.body.feed(wire) is False, why
    assert stream.written == [frame(event("a"))] and stream.body.take()


def test_the_native_path_waits_for_the_python_relay_to_forward_an_event(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    # A first event the client does not get (the usage it did not ask for) stamps the clock but forwards nothing:
    # the stream has not begun for the client, and heartbeats may still come, so the next event is the Python
    # relay's too.
    assert stream.read(frame(USAGE_ONLY)) == "python"
    assert stream.record.first_event_at is not None and not stream.relay.forwarded and stream.written == []
    assert stream.read(frame(event("a"))) == "python"
    assert stream.relay.forwarded and stream.read(frame(event("b"))) == "native"


def test_an_event_begun_in_the_python_relay_is_finished_there(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    stream.read(frame(event("a")))
    whole = event("b")
    assert stream.read(frame(whole[:10])) == "python"  # the Python relay holds the event's start
    assert stream.read(frame(whole[10:])) == "python"
    assert stream.written == [frame(event("a")), frame(whole)]


def refusing_client(stream: Stream, module: ModuleType) -> _StreamRelay:
    """`stream` after its first token, its client's transport now refusing every write; a relay for it that has
    forwarded, so the native path writes (and fails)."""
    stream.read(frame(event("a")))

    def refuse(data: bytes) -> None:
        raise ConnectionError("gone")

    stream.cycle.transport.write = refuse  # type: ignore[method-assign]
    relay = _StreamRelay(stream.events, stream.record, BodyNowait(stream.cycle), module)
    relay.forwarded = True
    return relay


def test_a_failed_write_keeps_the_data_and_raises_to_the_caller(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    stream.body.relay = refusing_client(stream, relay_module).native
    with pytest.raises(ConnectionError, match="gone"):
        stream.body.feed(frame(event("b")))
    assert stream.body.take() == event("b")


def test_a_failed_write_in_the_read_callback_hands_the_stream_back_with_its_error(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    relay = refusing_client(stream, relay_module)
    stream.connection.set_relay(relay, relay.native)
    assert stream.read(frame(event("b"))) == "reader"
    assert isinstance(stream.connection.relay_error, ConnectionError) and stream.connection.relay is None
    assert stream.body.take() == event("b")  # for the reader, which raises the error


def test_reads_for_no_native_body_take_the_python_path(relay_module: ModuleType) -> None:
    connection = _Connection(relay_module)
    receive = connection.data_received
    receive(b"HTTP/1.1 200 OK\r\n")  # a response head, before any body
    connection.body = _ChunkedBody()  # llhttp's decoder, as without NATIVE_RELAY
    receive(b"5\r\nhello\r\n")
    assert connection.buffer == b"HTTP/1.1 200 OK\r\n" and connection.body.take() == b"hello"
    assert type(receive.__self__) is relay_module.Receiver
    assert _Connection().data_received.__func__ is _Connection._received  # without the module: the Python path


def test_a_relay_or_decoder_is_set_up_once(relay_module: ModuleType) -> None:
    stream = Stream(relay_module)
    with pytest.raises(TypeError, match="initialised once"):
        stream.relay.native.__init__(stream.relay, stream.events, stream.record, print, Flow(), Cycle())
    with pytest.raises(TypeError, match="initialised once"):
        stream.body.__init__(RemoteProtocolError)
    with pytest.raises(TypeError, match="an initialised EventRelay"):
        stream.body.relay = relay_module.EventRelay.__new__(relay_module.EventRelay)
    with pytest.raises(TypeError, match="was not called"):
        relay_module.ChunkedBody.__new__(relay_module.ChunkedBody).feed(b"5\r\n")
    with pytest.raises(TypeError, match="was not called"):
        relay_module.Receiver.__new__(relay_module.Receiver).receive(b"5\r\n")


def test_a_module_built_from_another_relay_c_is_not_used(relay_module: ModuleType, monkeypatch) -> None:
    monkeypatch.setattr(native, "source_digest", lambda: "0" * 16)
    native.load.cache_clear()
    try:
        assert native.load() is None
    finally:
        monkeypatch.undo()
        native.load.cache_clear()
    assert native.load() is relay_module


# -- through the gateway ----------------------------------------------------------------------------------------

CHAT = [event(word) for word in ("Hello", ",", " world", "!")]
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n'
DONE = b"data: [DONE]\n\n"
RESPONSES = [
    b'event: response.created\ndata: {"type":"response.created"}\n\n',
    *(
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"%s"}\n\n' % w
        for w in (b"Hel", b"lo")
    ),
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
    b'{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}\n\n',
]
# Each script: the engine's writes, each a list of events framed as one chunk, or raw bytes (a chunk cut anywhere).
SCRIPTS: dict[str, list[list[bytes] | bytes]] = {
    "one-event-a-chunk": [[e] for e in CHAT] + [[USAGE], [DONE]],
    "events-together": [[CHAT[0]], CHAT[1:3], [CHAT[3], USAGE, DONE]],
    "split-events": [
        frame(CHAT[0]) + frame(CHAT[1])[:9],
        frame(CHAT[1])[9:] + frame(CHAT[2] + CHAT[3][:20]),
        frame(CHAT[3][20:]),
        [USAGE],
        [DONE],
    ],
    "responses": [[e] for e in RESPONSES],
}


class ScriptedStream(QuietHandler):
    """An engine that streams the script the request id names (the one header the gateway passes on), one write at
    a time, a little apart (separate reads)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for write in SCRIPTS[self.headers["x-request-id"]]:
            self.wfile.write(write if isinstance(write, bytes) else frame(*write))
            self.wfile.flush()
            time.sleep(0.03)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture(scope="module")
def scripted_engine() -> Iterator[str]:
    with FakeServer(ScriptedStream) as server:
        yield server.url


def stream_through(gateway_url: str, path: str, script: str, body: dict[str, Any]) -> bytes:
    """What a client reads of the script's stream through the gateway."""
    url = f"{gateway_url}{path}"
    with httpx.stream("POST", url, json=body, headers={"x-request-id": script}, timeout=30) as response:
        assert response.status_code == 200
        return b"".join(response.iter_bytes())


@pytest.mark.parametrize("usage", [False, True], ids=["usage-unasked", "usage-asked"])
def test_a_client_gets_the_same_stream_with_the_native_relay_on_and_off(
    relay_module: ModuleType, scripted_engine: str, tmp_path: Path, usage: bool
) -> None:
    answers: dict[str, dict[str, bytes]] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    for setting in ("true", "false"):
        with run_gateway(scripted_engine, tmp_path, {"NATIVE_RELAY": setting}) as gateway:
            first = json.loads(gateway.log.read_text().splitlines()[0])
            assert first["relay"] == ("native" if setting == "true" else "python")
            answers[setting] = {}
            for name in SCRIPTS:
                path, body = (
                    ("/v1/responses", {"model": "m", "input": "hi", "stream": True})
                    if name == "responses"
                    else ("/v1/chat/completions", {"model": "m", "messages": [], "stream": True})
                )
                if usage and name != "responses":
                    body["stream_options"] = {"include_usage": True}
                answers[setting][name] = stream_through(gateway.url, path, name, body)
            records[setting] = gateway.wait_record(len(SCRIPTS))
    assert answers["true"] == answers["false"]
    chat = answers["true"]["one-event-a-chunk"]
    assert chat == b"".join(CHAT) + (USAGE if usage else b"") + DONE
    assert answers["true"]["split-events"] == answers["true"]["events-together"] == chat
    assert answers["true"]["responses"] == b"".join(RESPONSES)
    counts = [[(r["prompt_tokens"], r["completion_tokens"], r["outcome"]) for r in records[s]] for s in records]
    assert counts[0] == counts[1] == [(3, 4, "completed")] * 3 + [(3, 2, "completed")]
