"""The gateway on the shared server (common/http/): its drain cut and a client's leaving stop the upstream
request, a body refused by size is refused before a client that waits for `100 Continue` sends it, a head over
MAX_HEADER_BYTES gets a JSON 431, and Ctrl-C stops it cleanly. Against a stand-in engine that streams until its
client hangs up, so these run without vLLM."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.llm.stack import run_gateway, wait_until

CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
)
STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@dataclass
class EndlessEngine:
    """A stand-in for vLLM that streams one event every 50 ms until the gateway closes the connection."""

    url: str
    streams_closed: threading.Semaphore


@pytest.fixture
def engine() -> Iterator[EndlessEngine]:
    closed = threading.Semaphore(0)

    class Endless(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for _ in range(1200):  # a minute at most, however the test ends
                    self.wfile.write(CHUNK)
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # the gateway closed the upstream connection: what makes vLLM abort
                closed.release()
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield EndlessEngine(f"http://127.0.0.1:{server.server_address[1]}", closed)
    server.shutdown()


def _raw_exchange(url: str, head: bytes) -> bytes:
    """Send `head` on a fresh connection and read until the server closes it (or 10 s pass)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_the_drain_cuts_a_stream_past_the_grace_and_closes_the_upstream(engine, tmp_path: Path):
    with run_gateway(engine.url, tmp_path, {"SHUTDOWN_GRACE_S": "2"}) as gateway:
        with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=STREAM, timeout=30) as response:
            chunks = response.iter_raw()
            first = next(chunks)
            gateway.terminate()
            rest = b"".join(chunks)
        assert first.startswith(b"data:")
        assert b"the server shut down before the generation finished" in rest
        assert engine.streams_closed.acquire(timeout=10), "the gateway kept the upstream stream open"
        assert gateway.process.wait(timeout=30) == 0  # a clean stop (common/http/entrypoint.py)
        assert [record["outcome"] for record in gateway.records()] == ["cut"]


def test_a_client_that_leaves_mid_stream_closes_the_upstream(engine, tmp_path: Path):
    with run_gateway(engine.url, tmp_path) as gateway:
        with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", json=STREAM, timeout=30) as response:
            next(response.iter_raw())
        assert engine.streams_closed.acquire(timeout=10), "the gateway kept the upstream stream open"
        assert gateway.wait_record(1)[-1]["outcome"] == "client_gone"


def test_a_body_too_large_is_refused_before_a_waiting_client_sends_it(engine, tmp_path: Path):
    with run_gateway(engine.url, tmp_path, {"MAX_BODY_BYTES": "1024"}) as gateway:
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n"
            b"content-length: 4096\r\nexpect: 100-continue\r\n\r\n"
        )
        answer = _raw_exchange(gateway.url, head)  # the body is never sent: the client waits for an invitation
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert b"100 Continue" not in answer
    assert b"larger than 1024 bytes" in answer


def test_a_head_over_max_header_bytes_gets_a_json_431(engine, tmp_path: Path):
    with run_gateway(engine.url, tmp_path, {"MAX_HEADER_BYTES": "2048"}) as gateway:
        head = b"GET /v1/models HTTP/1.1\r\nhost: gateway\r\nx-padding: " + b"a" * 4096 + b"\r\n\r\n"
        answer = _raw_exchange(gateway.url, head)
        assert answer.startswith(b"HTTP/1.1 431 "), answer
        error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]  # the gateway's (OpenAI's) shape
        assert (error["message"], error["code"]) == ("request headers larger than 2048 bytes", 431)
        assert httpx.get(f"{gateway.url}/health", timeout=5).status_code == 200  # the server serves on


def test_ctrl_c_stops_an_idle_gateway_at_once_without_a_traceback(engine, tmp_path: Path):
    with run_gateway(engine.url, tmp_path) as gateway:
        gateway.process.send_signal(signal.SIGINT)
        elapsed = wait_until(lambda: gateway.process.poll() is not None, 10, "the gateway stops on Ctrl-C")
        assert elapsed < 3.0
        assert gateway.process.returncode == 130
        assert "Traceback" not in gateway.tail()
        assert '"message": "stopping", "signal": "SIGINT"' in gateway.tail()
