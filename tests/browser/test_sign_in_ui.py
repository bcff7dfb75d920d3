"""Signing in from a real Chromium: the UI sends the browser to the user pool's sign-in and back,
and the Gradio UI then works with the session cookie alone (its own calls carry no token)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.server import create_app
from app.settings import load_settings
from common.server_process import free_port
from tests.app.fakes import FakeBackend
from tests.app.live_server import TEST_SETTINGS
from tests.starting_gate.gate_server import serving_gate
from tests.support.fake_user_pool import FakeUserPool

pytestmark = pytest.mark.browser


@contextmanager
def signed_in_service_at(public_url: str, pool: FakeUserPool, cache: Path, port: int = 0) -> Iterator[str]:
    """The service with AUTH=cognito on `port` (0: a free one), reached by browsers at `public_url` (itself, or a
    gate in front of it)."""
    port = port or free_port()
    settings = load_settings(
        **{**TEST_SETTINGS, "model_cache_dir": cache, **pool.service_settings(), "public_url": public_url}
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, lambda _s: FakeBackend()), host="127.0.0.1", port=port, log_config=None)
    )
    thread = threading.Thread(target=server.run, daemon=True, name="uvicorn-signed-in")
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while not (server.started and httpx.get(f"{url}/readiness").status_code == 200):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the signed-in service did not become ready")
        time.sleep(0.1)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def signed_in_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FakeUserPool]]:
    """The service with AUTH=cognito on a known port (PUBLIC_URL must name it before it starts)."""
    with FakeUserPool().serving() as pool:
        port = free_port()
        public_url = f"http://127.0.0.1:{port}"
        with signed_in_service_at(public_url, pool, tmp_path_factory.mktemp("signed-in"), port=port):
            yield public_url, pool


@pytest.fixture(scope="module")
def gated_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FakeUserPool]]:
    """The trial's front: browsers reach the starting gate, which serves the sign-in and forwards to the service."""
    with FakeUserPool().serving() as pool:
        gate_port = free_port()
        public_url = f"http://127.0.0.1:{gate_port}"
        with (
            signed_in_service_at(public_url, pool, tmp_path_factory.mktemp("gated")) as service_url,
            serving_gate(gate_port, upstream_url=service_url, **pool.service_settings()),
        ):
            yield public_url, pool


@pytest.mark.parametrize("front", ["signed_in_service", "gated_service"])
def test_a_browser_signs_in_then_generates_an_image(browser, front, request, tmp_path: Path):
    url, pool = request.getfixturevalue(front)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url + "/", wait_until="domcontentloaded")
    # Through /auth/login, the pool's authorize endpoint and /auth/callback, back to the UI.
    assert page.url == url + "/"
    (session,) = [c for c in context.cookies() if c["name"] == "sd_session"]
    assert session["httpOnly"] and session["sameSite"] == "Lax"
    assert not pool.challenges  # the code was redeemed once, with its PKCE verifier
    page.locator("#prompt textarea").fill("a lighthouse on a cliff at dusk")
    page.locator("#generate").click()
    image = page.locator("#result img")
    image.wait_for(state="visible", timeout=60_000)
    assert image.evaluate("img => img.complete && img.naturalWidth") == TEST_SETTINGS["default_width"]
    # The same page without the session: the API refuses it.
    context.clear_cookies()
    status = page.evaluate("async () => (await fetch('/v1/info')).status")
    assert status == 401
    context.close()
    # A stranger's browser after the user's: nothing of the user's session reaches the service for it.
    stranger = browser.new_context()
    assert stranger.request.get(url + "/v1/info").status == 401
    stranger.close()
