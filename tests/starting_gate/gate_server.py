"""The gate served as `python -m starting_gate` serves it (the shared bounded server), in a thread on a loopback
port chosen before its settings are made, so that PUBLIC_URL (the sign-in's callback) can name it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from common.http.protocol import server_config
from common.http.server import DrainingServer
from starting_gate.server import Gate, create_app
from starting_gate.settings import load_settings

COLD_UPSTREAM = "http://127.0.0.1:9"  # the discard port: nothing listens, so the connection is refused (a cold pool)


@dataclass
class ServedGate:
    """A running gate: its URL and its app (the demand it counted)."""

    url: str
    gate: Gate


@contextmanager
def serving_gate(port: int = 0, **overrides: object) -> Iterator[ServedGate]:
    """Serve a gate with these settings (UPSTREAM_URL defaults to a cold pool; PUBLIC_URL to the gate itself) on
    `port` (0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = load_settings(**{"upstream_url": COLD_UPSTREAM, "public_url": url, **overrides})
    gate = create_app(settings)
    server = DrainingServer(server_config(gate, settings, lifespan="on"), gate, settings.shutdown_grace_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="gate")
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gate did not start")
            time.sleep(0.05)
        yield ServedGate(url, gate)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
