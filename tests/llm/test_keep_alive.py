"""Behind the ALB, the gateway keeps an idle connection open longer than the ALB does (KEEP_ALIVE_S): otherwise
the ALB may send the next request down a connection the gateway has just closed, and the client gets a 502."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.llm.stack import run_gateway

REQUEST = b"GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n"


def second_request_on_one_connection(url: str, idle_s: float) -> bytes:
    """The answer to a second request sent `idle_s` after the first, on the same connection (b"" if closed)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(REQUEST)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(idle_s)
        try:
            conn.sendall(REQUEST)
            return conn.recv(65536)
        except OSError:
            return b""


def test_an_idle_connection_outlives_keep_alive_s_only_when_it_is_longer(tmp_path: Path) -> None:
    # Generous margins either side: the machine may be busy.
    with run_gateway("http://127.0.0.1:9", tmp_path, {"KEEP_ALIVE_S": "0.5"}) as short:
        answer = second_request_on_one_connection(short.url, 3.0)
        assert answer == b"", f"the connection outlived KEEP_ALIVE_S=0.5 by 2.5 s: {answer[:80]!r}"
    with run_gateway("http://127.0.0.1:9", tmp_path, {"KEEP_ALIVE_S": "60"}) as long:
        answer = second_request_on_one_connection(long.url, 3.0)
        assert answer.startswith(b"HTTP/1.1 200"), f"closed within KEEP_ALIVE_S=60: {answer[:80]!r}"
