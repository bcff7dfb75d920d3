"""Clients that open connections and stall cannot use up the file descriptors: the probes still answer."""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from common.server_process import free_port
from tests.app.fakes import FakeBackend
from tests.app.live_server import serve

MAX_CONNECTIONS = 32
STALLERS = 200  # more connections than the descriptor limit below leaves the server


@contextlib.contextmanager
def descriptor_limit(extra: int) -> Iterator[None]:
    """Lower this process's open-file limit to what is open now plus `extra`, as on a host with a low
    `ulimit -n` (the server runs in this process, so its connections count against it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def capped_server(tmp_path):
    backend = FakeBackend()
    # Long clocks: only the connection limit can free the stalled connections within this test.
    with serve(
        tmp_path, lambda _s: backend, max_connections=MAX_CONNECTIONS, header_timeout_s=120, body_timeout_s=120
    ) as live:
        yield live


def test_stalled_connections_beyond_max_connections_do_not_starve_the_probes(capped_server):
    parts = urlsplit(capped_server.url)
    stallers: list[socket.socket] = []
    # Room for the test's own client sockets, and for MAX_CONNECTIONS and a few more on the server's side.
    with descriptor_limit(STALLERS + 2 * MAX_CONNECTIONS):
        try:
            for i in range(STALLERS):
                sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
                if i % 2:  # half send a head and stall in the body, half send half a head
                    sock.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{")
                else:
                    sock.sendall(b"GET /health HTTP/1.1\r\n")
                stallers.append(sock)
            started = time.monotonic()
            with httpx.Client(base_url=capped_server.url, timeout=10) as client:
                assert client.get("/health").status_code == 200
                assert client.get("/readiness").status_code == 200
            assert time.monotonic() - started < 5
            time.sleep(0.5)
            closed = sum(_closed_by_server(sock) for sock in stallers)
            assert closed >= STALLERS - MAX_CONNECTIONS
        finally:
            for sock in stallers:
                sock.close()


def _closed_by_server(sock: socket.socket) -> bool:
    """True if the server has closed the connection (after a 503, or without a word)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    sock.settimeout(5)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    assert received == b"" or received.startswith(b"HTTP/1.1 503 Service Unavailable"), received
    return True


def test_max_connections_beyond_the_hard_descriptor_limit_exits_2_with_one_line():
    def low_hard_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    result = subprocess.run(
        [sys.executable, "-m", "app"],
        env={
            "PATH": "/usr/bin:/bin",
            "HOST": "127.0.0.1",
            "PORT": str(free_port()),  # whichever check comes first, this one is the only one that can fail
            "MAX_CONNECTIONS": "1000",
            "UI": "false",
            "JOBS": "off",
        },
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=low_hard_limit,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "error: MAX_CONNECTIONS=1000 needs 1064 open files, but the limit is 256 (ulimit -n): "
        "lower MAX_CONNECTIONS or raise the limit"
    ]


def test_a_soft_descriptor_limit_below_max_connections_is_raised(tmp_path):
    """A host whose `ulimit -n` is 256 with room to raise it: the service raises it and serves."""

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    code = (
        "import resource; from common.http.protocol import ensure_descriptors; from app.settings import load_settings;"
        "ensure_descriptors(load_settings()); print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": "/usr/bin:/bin", "MAX_CONNECTIONS": "1000"},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=low_soft_limit,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 1064
