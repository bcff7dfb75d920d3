"""Behind the ALB, the gateway keeps an idle connection open longer than the ALB does (KEEP_ALIVE_S): otherwise
the ALB may send the next request down a connection the gateway has just closed, and the client gets a 502. In front
of vLLM it is the other way round: the gateway keeps an idle connection to the engine a little less long than the
engine does (UPSTREAM_KEEP_ALIVE_S), and as long as that allows, so a burst after an idle while does not connect
again."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

import httpx

from common.version import VERSION
from tests.llm.stack import run_gateway, run_standin

ALIVE = {"status": "alive", "version": VERSION}


def second_request_on_one_connection(url: str, idle_s: float) -> bytes:
    """The body of a second GET /health sent `idle_s` after the first, on the same connection (b"" if closed).

    http.client reads each response whole (its Content-Length) and never opens a second connection by itself
    while the first one's socket is still open, so a connection the server closed shows as a failure here."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/health")
        first = conn.getresponse()
        assert first.status == 200 and json.loads(first.read()) == ALIVE
        time.sleep(idle_s)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().read()
        except (http.client.HTTPException, OSError):
            return b""
    finally:
        conn.close()


def test_an_idle_connection_outlives_keep_alive_s_only_when_it_is_longer(tmp_path: Path) -> None:
    # Generous margins either side: the machine may be busy.
    with run_gateway("http://127.0.0.1:9", tmp_path, {"KEEP_ALIVE_S": "0.5"}) as short:
        answer = second_request_on_one_connection(short.url, 3.0)
        assert answer == b"", f"the connection outlived KEEP_ALIVE_S=0.5 by 2.5 s: {answer[:80]!r}"
    with run_gateway("http://127.0.0.1:9", tmp_path, {"KEEP_ALIVE_S": "60"}) as long:
        answer = second_request_on_one_connection(long.url, 3.0)
        assert json.loads(answer) == ALIVE, f"closed within KEEP_ALIVE_S=60: {answer[:80]!r}"


def test_connections_to_the_engine_are_kept_as_long_as_the_engine_keeps_them(tmp_path: Path) -> None:
    completion = {"model": "standin", "prompt": "a b", "max_tokens": 2, "stream": True}
    with run_standin() as (engine_url, engine):
        # The engine keeps an idle connection 2 s (the gateway: 1 s), then 10 s (9 s); the second request comes
        # 1.5 s after the first ended, with a margin either side for a busy machine.
        for keep_alive_s, connections in ((2, 2), (10, 1)):
            with run_gateway(engine_url, tmp_path, {"UPSTREAM_KEEP_ALIVE_S": str(keep_alive_s)}) as gateway:
                opened = engine.connections
                for wait_s in (0.0, 1.5):
                    time.sleep(wait_s)
                    answer = httpx.post(f"{gateway.url}/v1/completions", json=completion, timeout=30)
                    assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
                assert engine.connections - opened == connections, f"UPSTREAM_KEEP_ALIVE_S={keep_alive_s}"
