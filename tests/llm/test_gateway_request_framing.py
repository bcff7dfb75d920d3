"""The gateway refuses what the shared server (common/http/protocol.py) refuses in a request's framing, in its own
(OpenAI's) error shape, through the real process on a raw socket: a chunked body's trailer field that never ends (a
431 long before the body timeout, where it grew until then), a head without Host or with two, and a WebSocket
handshake (a plain-text 500 before)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import suppress
from urllib.parse import urlsplit

import pytest

from tests.llm.stack import GatewayProcess, run_gateway, run_standin
from tools.attack_gateway import read_all

BODY_TIMEOUT_S = 30.0  # long, so that an answer well before it is the trailer bound's, not the body clock's
MAX_HEADER_BYTES = 4096


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = {"BODY_TIMEOUT_S": str(BODY_TIMEOUT_S), "MAX_HEADER_BYTES": str(MAX_HEADER_BYTES)}
    with run_standin() as (url, _engine), run_gateway(url, tmp_path_factory.mktemp("framing"), env) as process:
        yield process


def exchange(gateway: GatewayProcess, *sends: bytes) -> tuple[bytes, float]:
    """Send each of `sends` on a fresh connection (a refusal may cut the sending short), then read until the gateway
    closes; the answer and the seconds that took."""
    parts = urlsplit(gateway.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        with suppress(BrokenPipeError, ConnectionResetError):
            for data in sends:
                sock.sendall(data)
        return read_all(sock, BODY_TIMEOUT_S + 10)


def status_and_error(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 ") and b"content-type: application/json" in head.lower(), answer[:200]
    return int(head.split()[1]), json.loads(body)["error"]


def test_a_trailer_field_that_never_ends_gets_a_431_long_before_the_body_timeout(gateway: GatewayProcess):
    head = (
        b"POST /v1/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n"
    )
    answer, elapsed = exchange(gateway, head + b"\r\n2\r\n{}\r\n0\r\nx-trail: ", *[b"a" * 1024] * 64)
    status, error = status_and_error(answer)
    assert (status, error["message"]) == (431, f"request trailers larger than {MAX_HEADER_BYTES} bytes")
    assert elapsed < BODY_TIMEOUT_S / 3


@pytest.mark.parametrize(
    ("head", "message"),
    [
        pytest.param(b"GET /v1/models HTTP/1.1\r\n\r\n", "an HTTP/1.1 request needs a Host header field", id="none"),
        pytest.param(
            b"GET /v1/models HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", "more than one Host header field", id="two"
        ),
        pytest.param(
            b"GET /v1/chat/completions HTTP/1.1\r\nhost: g\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
            b"sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
            "an upgrade to websocket is not served here: this server speaks plain HTTP/1.1 only",
            id="websocket",
        ),
    ],
)
def test_a_head_without_one_host_or_asking_for_a_websocket_gets_a_400_in_the_gateways_shape(
    gateway: GatewayProcess, head: bytes, message: str
):
    answer, _ = exchange(gateway, head)
    status, error = status_and_error(answer)
    assert (status, error["message"], error["type"]) == (400, message, "invalid_request_error")


def test_an_http_1_0_probe_without_host_is_served(gateway: GatewayProcess):
    answer, _ = exchange(gateway, b"GET /health HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
