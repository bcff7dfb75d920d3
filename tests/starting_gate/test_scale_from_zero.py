"""Scale from zero through the starting gate: while no serving pod is ready a request gets "starting, about N
minutes" with Retry-After (and counts as demand for the pool's KEDA trigger); once the pool's first pod is up,
the same request through the same gate gets an image. The real image service (built-in tiny model) is the pod."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.backends.selection import load_backend
from app.bench.inprocess import serve_in_thread
from app.server import create_app as create_image_app
from app.settings import load_settings
from common.http.protocol import server_config
from starting_gate.demand import DemandCounter
from starting_gate.server import GATE_HEALTH_PATH, create_app
from starting_gate.settings import GateSettings
from starting_gate.settings import load_settings as load_gate_settings
from tests.app.live_server import TEST_SETTINGS
from tests.app.ui_protocol import ui_generate

REQUEST = {"prompt": "a lighthouse at dusk", "steps": 2, "width": 64, "height": 64, "seed": 7}


@contextmanager
def reserved_port() -> Iterator[socket.socket]:
    """A loopback port that is bound but not listening: connections are refused, as by a Service with no ready
    endpoint, until a server starts listening on this very socket."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock
    finally:
        sock.close()


@contextmanager
def image_pod_on(sock: socket.socket, cache_dir: Path) -> Iterator[str]:
    """The real image service, as `python -m app` serves it, on the reserved socket; yields once it is ready."""
    settings = load_settings(**{**TEST_SETTINGS, "model_cache_dir": cache_dir})
    server = uvicorn.Server(server_config(create_image_app(settings, load_backend), settings, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="image-pod")
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        deadline = time.monotonic() + 180
        with httpx.Client(base_url=url, timeout=5) as client:
            while True:
                try:
                    if client.get("/readiness").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or not thread.is_alive():
                    raise RuntimeError("the image service did not become ready")
                time.sleep(0.1)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def pool_port() -> Iterator[socket.socket]:
    with reserved_port() as sock:
        yield sock


def gate_settings(sock: socket.socket) -> GateSettings:
    return load_gate_settings(
        upstream_url=f"http://127.0.0.1:{sock.getsockname()[1]}",
        starting_minutes=9,
        retry_after_seconds=20,
        demand_units=({"DeploymentUnit": "sd-gpu", "Accelerator": "nvidia"},),
    )


def test_a_request_while_cold_is_told_to_wait_then_gets_an_image(pool_port: socket.socket, tmp_path: Path) -> None:
    counter = DemandCounter()
    settings = gate_settings(pool_port)
    gate = create_app(settings, counter)
    with serve_in_thread(gate, settings) as gate_url, httpx.Client(base_url=gate_url, timeout=120) as client:
        cold = client.post("/v1/generate", json=REQUEST)
        assert cold.status_code == 503
        assert cold.headers["retry-after"] == "20"
        assert cold.json()["error"] == "starting"
        assert "starting, about 9 minutes" in cold.json()["detail"]
        assert counter.total == 1  # the demand that wakes the pool

        with image_pod_on(pool_port, tmp_path / "models"):
            warm = client.post("/v1/generate", json=REQUEST)
            assert warm.status_code == 200, warm.text
            assert warm.headers["content-type"] == "image/png"
            assert warm.content.startswith(b"\x89PNG\r\n\x1a\n")
            assert warm.headers["x-seed"] == "7"
            assert counter.total == 1  # served requests are the pod's own to count
            # The UI comes through the gate too: its page, its links on the public host, its event stream.
            assert client.get("/", headers={"accept": "text/html"}).status_code == 200
            config = client.get("/config", headers={"host": "sd.example.com", "x-forwarded-proto": "https"})
            assert config.json()["root"] == "https://sd.example.com"
            done = ui_generate(gate_url, prompt="a lighthouse at dusk", seed=7)
            assert done["success"], done
            # The pool's own body bound holds through the gate.
            too_big = client.post(
                "/v1/generate", json={**REQUEST, "prompt": "x" * (TEST_SETTINGS["max_body_bytes"] * 2)}
            )
            assert too_big.status_code == 413


def test_a_browser_gets_a_page_that_reloads_while_cold(pool_port: socket.socket) -> None:
    settings = gate_settings(pool_port)
    with serve_in_thread(create_app(settings), settings) as gate_url:
        page = httpx.get(gate_url + "/", headers={"accept": "text/html"}, timeout=10)
    assert page.status_code == 503
    assert page.headers["retry-after"] == "20"
    assert page.headers["content-type"].startswith("text/html")
    assert "<meta http-equiv='refresh' content='20'>" in page.text
    assert "starting, about 9 minutes" in page.text


def test_the_gate_answers_its_own_health_while_cold(pool_port: socket.socket) -> None:
    settings = gate_settings(pool_port)
    with serve_in_thread(create_app(settings), settings) as gate_url:
        assert httpx.get(gate_url + GATE_HEALTH_PATH, timeout=10).status_code == 200
