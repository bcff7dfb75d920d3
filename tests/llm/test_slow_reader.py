"""A client that reads its answer slowly but steadily (issue 38): it is cut once its answer has waited
DELIVERY_WAIT_S for it in all, and its slots go back. Through the real gateway process in front of the full-speed
stand-in engine, with a real client socket that reads at a set pace."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.stack import GatewayProcess, run_gateway, run_standin, wait_until
from tests.llm.test_gateway_bounds import completion, connect, dechunk, exchange, request, statuses

LIMIT = 4
DELIVERY_WAIT_S = 3.0
SLACK_S = 10.0  # two shared cores: what the cut may come late by


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    with run_standin() as (url, _engine):
        yield url


def refused(gateway: GatewayProcess) -> bool:
    """Whether a short completion is refused now (429: the slots are taken)."""
    answer = exchange(gateway, request("POST", "/v1/completions", completion()))
    assert statuses(answer) in ([200], [429]), answer[:200]
    return statuses(answer) == [429]


def read_rest(sock: socket.socket) -> bytes:
    """Everything until the close, read as fast as it comes."""
    sock.settimeout(30)
    received = bytearray()
    while chunk := sock.recv(1 << 20):
        received += chunk
    return bytes(received)


def test_a_steady_slow_reader_is_cut_and_its_slots_freed(engine_url: str, tmp_path: Path):
    # The attack: n=LIMIT takes every slot, and its client reads about 40 KB/s, never stopping long enough for
    # WRITE_TIMEOUT_S (30 s). Before the bound it held the slots for as long as its answer lasted.
    env = {"MAX_CONCURRENT_REQUESTS": str(LIMIT), "DELIVERY_WAIT_S": str(DELIVERY_WAIT_S)}
    with run_gateway(engine_url, tmp_path, env) as gateway, connect(gateway, rcvbuf=4096) as slow:
        slow.sendall(request("POST", "/v1/completions", completion(n=LIMIT, max_tokens=2_000_000, stream=True)))
        received = bytearray(slow.recv(4096))
        assert received.startswith(b"HTTP/1.1 200")
        assert refused(gateway)
        started, freed_after = time.monotonic(), None
        while time.monotonic() - started < DELIVERY_WAIT_S + SLACK_S:
            received += slow.recv(4096)
            time.sleep(0.1)
            if not refused(gateway):
                freed_after = time.monotonic() - started
                break
        assert freed_after is not None, "the slow reader kept every slot"
        received += read_rest(slow)
        # The request's record is written once its answer has ended, a moment after the connection closed.
        wait_until(lambda: '"outcome": "slow_client"' in gateway.tail(), SLACK_S, "the slow client's record")
        log = gateway.tail()
    events = [event for event in dechunk(bytes(received).partition(b"\r\n\r\n")[2]).split(b"\n\n") if event]
    error = json.loads(events[-1].removeprefix(b"data: "))["error"]
    assert error["code"] == 408
    assert "read its answer too slowly" in error["message"]
    assert '"message": "client read too slowly; its stream was cut"' in log, log
