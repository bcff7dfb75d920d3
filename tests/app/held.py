"""Helpers for tests on the `held_service` fixture: hold its pipeline, park requests, wait for state."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer


def info(live: LiveServer) -> dict:
    """GET /v1/info."""
    return httpx.get(f"{live.url}/v1/info", timeout=10).json()


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll `condition` until it holds; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def post_and_leave_open(url: str, prompt: str) -> socket.socket:
    """Send a whole /v1/generate request on a raw socket and keep the connection open, unread."""
    parts = urlsplit(url)
    body = json.dumps({"prompt": prompt, "steps": 2}).encode()
    sock = socket.create_connection((parts.hostname, parts.port))
    head = (
        f"POST /v1/generate HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def hold_the_pipeline(live: LiveServer, backend: FakeBackend) -> socket.socket:
    """Start one request and keep it inside the pipeline call until `backend.release` is set."""
    backend.release.clear()
    blocker = post_and_leave_open(live.url, "blocker")
    wait_until(lambda: live.service.batcher.in_flight == 1 and live.service.batcher.depth == 0)
    return blocker


def finish(blocker: socket.socket, backend: FakeBackend) -> None:
    """Release the pipeline and read the blocker's answer."""
    backend.release.set()
    blocker.settimeout(30)
    blocker.recv(65536)
    blocker.close()
