"""Every request the page makes in a real Chromium is one the service serves (app/ui_routes.py), from
a load while the model is loading through generating, failing validation and reloading."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from app.ui_routes import ui_route_allowed
from tests.app.native_server import serve_gated

pytestmark = pytest.mark.browser


def test_the_page_uses_only_the_routes_the_service_serves(browser, tmp_path):
    requests: list[tuple[str, str, int]] = []
    with serve_gated(tmp_path) as server:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on(
            "requestfinished",
            lambda r: requests.append((r.method, urlsplit(r.url).path, r.response().status if r.response() else 0)),
        )

        # A stream still open when the page reloads ends as net::ERR_ABORTED: the page left, not a failure.
        def failed(request) -> None:
            if request.failure != "net::ERR_ABORTED":
                requests.append((request.method, urlsplit(request.url).path, -1))

        page.on("requestfailed", failed)
        page.goto(server.url + "/", wait_until="domcontentloaded")
        page.get_by_text("Loading the model").wait_for(timeout=30_000)
        page.wait_for_timeout(1500)  # at least one status poll while loading
        server.load.set()
        page.get_by_text("Demo model loaded").wait_for(timeout=30_000)
        page.get_by_text("Options").click()
        page.locator("#prompt textarea").fill("a lighthouse")
        page.locator("#generate").click()
        page.locator("#result img").wait_for(state="visible", timeout=30_000)
        page.locator("#prompt textarea").press("Enter")
        seed = page.get_by_label("Seed (empty: random)")
        seed.fill("seven")
        seed.blur()
        page.locator("#generate").click()
        page.get_by_text("seed: Input should be a valid integer").first.wait_for(timeout=30_000)
        page.reload(wait_until="load")
        page.get_by_text("Demo model loaded").wait_for(timeout=30_000)
        page.close()
    ours = [r for r in requests if r[1] and not r[1].startswith("data:")]
    assert ours, "no requests recorded"
    assert [r for r in ours if not ui_route_allowed(r[0], r[1])] == []
    assert [r for r in ours if not 200 <= r[2] < 400] == []
    used = {(m, p) for m, p, _ in ours}
    # The page really used the routes that matter (a recording that missed them would prove nothing).
    assert {("POST", "/gradio_api/run/predict"), ("POST", "/gradio_api/queue/join")} <= used
    assert any(p.startswith("/gradio_api/file=") for _, p in used)
