"""Limits at the HTTP layer: header size and time, body size on every route, no uploads."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import httpx
import pytest

from tests.app import held


def connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_an_oversized_header_is_refused_and_the_connection_closed(held_service):
    live, _ = held_service
    sock = connect(live.url)
    request = b"GET /health HTTP/1.1\r\nHost: test\r\nX-Padding: " + b"a" * (64 * 1024) + b"\r\n\r\n"
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused while still writing: fine
        sock.sendall(request)
    answer = read_until_closed(sock)
    sock.close()
    assert not answer.startswith(b"HTTP/1.1 200")
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431")
    assert live.settings.max_header_bytes < 64 * 1024


@pytest.mark.parametrize(
    "sends",
    [
        pytest.param([b""], id="nothing"),
        pytest.param([b"GET /health HTTP/1.1\r\nHost: test\r\n"], id="headers never finished"),
        # A byte every 0.3 s: the clock runs from the first byte, it is not reset by each one.
        pytest.param([b"GET /health HTTP/1.1\r\n"] + [b"X"] * 40, id="headers dribbled"),
    ],
)
def test_a_connection_that_does_not_finish_its_headers_in_time_is_closed(held_service, sends):
    live, _ = held_service
    limit = live.settings.header_timeout_s
    sock = connect(live.url)
    started = time.monotonic()
    closed = False
    try:
        for chunk in sends:
            sock.sendall(chunk)
            time.sleep(0.3 if len(sends) > 1 else 0)
        sock.settimeout(limit + 10)
        closed = sock.recv(1024) == b""
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    finally:
        sock.close()
    elapsed = time.monotonic() - started
    assert closed
    assert elapsed < limit + 5


def test_a_complete_request_after_a_pause_is_served(held_service):
    live, _ = held_service
    sock = connect(live.url)
    time.sleep(live.settings.header_timeout_s / 3)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    assert read_until_closed(sock).startswith(b"HTTP/1.1 200")
    sock.close()


@pytest.mark.parametrize("path", ["/v1/generate", "/gradio_api/queue/join"])
def test_a_client_that_writes_the_whole_body_first_reads_the_413(held_service, path):
    live, _ = held_service
    body = json.dumps({"prompt": "x" * 2_000_000}).encode()
    request = urllib.request.Request(live.url + path, data=body, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    assert f"larger than {live.settings.max_body_bytes} bytes" in json.loads(refused.value.read())["error"]


def test_a_chunked_body_over_the_limit_on_a_ui_route_is_refused(held_service):
    live, _ = held_service

    def chunks():
        for _ in range(64):
            yield b"x" * 1024

    response = httpx.post(f"{live.url}/gradio_api/queue/join", content=chunks(), timeout=30)
    assert response.status_code == 413


def test_gradio_uploads_take_images_only(held_service, tmp_path):
    live, _ = held_service
    response = httpx.post(f"{live.url}/gradio_api/upload", files={"files": ("big.bin", b"\0" * 10_000)}, timeout=30)
    assert response.status_code == 422
    assert "big.bin is not a PNG, JPEG or WebP image" in response.json()["error"]
    not_a_form = httpx.post(f"{live.url}/gradio_api/upload", content=b"\0" * 100, timeout=30)
    assert not_a_form.status_code == 422


def _get_health(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
    return sock.recv(65536)


def test_an_idle_keep_alive_connection_lasts_keep_alive_s(held_service):
    """Behind the ALB, KEEP_ALIVE_S is set above its idle timeout (cdk/image/workload.py), so the
    ALB never sends on a connection the service has just closed."""
    live, _ = held_service
    limit = live.settings.keep_alive_s
    sock = connect(live.url)
    assert _get_health(sock).startswith(b"HTTP/1.1 200")
    time.sleep(limit / 2)
    assert _get_health(sock).startswith(b"HTTP/1.1 200"), "closed before KEEP_ALIVE_S"
    time.sleep(limit + 1.0)
    assert read_until_closed(sock) == b"", "still open after KEEP_ALIVE_S"
    sock.close()


def read_response(sock: socket.socket, timeout_s: float = 5.0) -> bytes:
    """The first bytes the server sends within `timeout_s` (b"" if it sends none)."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(65536)
    except TimeoutError:
        return b""


@pytest.mark.parametrize(
    ("path", "status"), [("/v1/generate", b"413"), ("/gradio_api/queue/join", b"413"), ("/gradio_api/upload", b"413")]
)
def test_a_refused_body_announced_with_expect_100_continue_is_refused_without_inviting_it(held_service, path, status):
    """RFC 9110 10.1.1: a server that will refuse the body answers the final status instead of 100."""
    live, _ = held_service
    sock = connect(live.url)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000000\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    answer = read_response(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
    assert b"100 Continue" not in answer


def test_a_small_body_announced_with_expect_100_continue_is_invited_and_served(held_service):
    live, _ = held_service
    body = b'{"prompt": "x", "steps": 1}'
    sock = connect(live.url)
    sock.sendall(
        b"POST /v1/generate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n" % len(body)
    )
    assert read_response(sock).startswith(b"HTTP/1.1 100 Continue")
    sock.sendall(body)
    assert read_until_closed(sock).startswith(b"HTTP/1.1 200")
    sock.close()


def test_an_oversized_header_pipelined_behind_another_request_is_refused(held_service):
    live, _ = held_service
    small = b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n"
    large = b"GET /health HTTP/1.1\r\nHost: test\r\nX-Padding: " + b"a" * (40 * 1024) + b"\r\n\r\n"
    sock = connect(live.url)
    sock.sendall(small + large)
    answers = read_until_closed(sock)
    sock.close()
    assert answers.startswith(b"HTTP/1.1 200")
    assert answers.count(b"HTTP/1.1 200") == 1, "the 40 KB head was served"
    assert b"HTTP/1.1 431" in answers
    assert live.settings.max_header_bytes < 40 * 1024


def test_pipelined_requests_within_the_limit_are_all_served(held_service):
    live, _ = held_service
    one = b"GET /health HTTP/1.1\r\nHost: test\r\nX-Padding: " + b"a" * 8000 + b"\r\n\r\n"
    last = b"GET /health HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    sock = connect(live.url)
    sock.sendall(one * 3 + last)
    answers = read_until_closed(sock)
    sock.close()
    assert answers.count(b"HTTP/1.1 200") == 4


def post_head(sock: socket.socket, length: int, path: str = "/v1/generate") -> None:
    """Send a POST's head announcing a `length`-byte JSON body, and none of the body."""
    head = f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    sock.sendall(head.encode() + b"\r\n")


@pytest.mark.parametrize("dribble", [False, True], ids=["stalled", "dribbled"])
def test_a_body_that_does_not_arrive_in_time_gets_a_408_and_the_connection_closed(held_service, caplog, dribble):
    live, _ = held_service
    caplog.set_level("INFO", logger="app.requests")
    limit = live.settings.body_timeout_s
    sock = connect(live.url)
    post_head(sock, 100)
    started = time.monotonic()
    sock.sendall(b'{"prompt": ')
    answer = b""
    sock.settimeout(limit + 10)
    try:
        # Dribbled: a byte every 0.2 s; the clock runs from the end of the head, each byte does not reset it.
        for _ in range(40 if dribble else 0):
            sock.sendall(b" ")
            time.sleep(0.2)
        answer = read_until_closed(sock)
    except (BrokenPipeError, ConnectionResetError):
        answer = read_until_closed(sock)
    elapsed = time.monotonic() - started
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert f"within {limit:g} s" in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert elapsed < limit + 3
    held.wait_until(lambda: 408 in request_log_statuses(caplog, "/v1/generate"))


def test_a_body_sent_after_a_pause_within_the_limit_is_served(held_service):
    live, _ = held_service
    body = b'{"prompt": "late but in time", "steps": 1}'
    sock = connect(live.url)
    post_head(sock, len(body))
    time.sleep(live.settings.body_timeout_s / 3)
    sock.sendall(body)
    sock.settimeout(30)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    sock.close()


def request_log_statuses(caplog: pytest.LogCaptureFixture, path: str) -> list[int]:
    return [r.status for r in caplog.records if r.name == "app.requests" and getattr(r, "path", "") == path]


def test_an_aborted_upload_is_logged_as_499_not_500(held_service, caplog):
    live, _ = held_service
    caplog.set_level("INFO", logger="app.requests")
    sock = connect(live.url)
    post_head(sock, 1000)
    sock.sendall(b"x" * 10)
    time.sleep(0.2)
    sock.close()
    # The service is shared: an earlier test's request may still log its 200 here; ours is the 499.
    held.wait_until(lambda: 499 in request_log_statuses(caplog, "/v1/generate"))
    assert 500 not in request_log_statuses(caplog, "/v1/generate")


def test_a_trailer_field_that_never_ends_gets_a_431_not_the_body_timeouts_408(held_service):
    """llhttp reports trailers after the body, when the head's bound was no longer counted: an unterminated trailer
    field grew until the body timeout (a 408), copied on every read."""
    live, _ = held_service
    sock = connect(live.url)
    sock.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: ")
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused while still writing: fine
        for _ in range(2 * live.settings.max_header_bytes // 1024):
            sock.sendall(b"a" * 1024)
    answer = read_until_closed(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error == f"request trailers larger than {live.settings.max_header_bytes} bytes"


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"GET /health HTTP/1.1\r\n\r\n", id="no-host"),
        pytest.param(b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", id="two-hosts"),
        pytest.param(
            b"GET / HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            id="websocket",
        ),
    ],
)
def test_a_head_without_one_host_or_asking_for_a_websocket_gets_a_json_400(held_service, head):
    live, _ = held_service
    sock = connect(live.url)
    sock.sendall(head)
    answer = read_until_closed(sock)  # closed after the answer
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]


def test_an_http_1_0_probe_without_host_is_served(held_service):
    """RFC 9112 section 3.2 asks Host only of HTTP/1.1 requests."""
    live, _ = held_service
    sock = connect(live.url)
    sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
    assert read_until_closed(sock).startswith(b"HTTP/1.1 200")
    sock.close()
