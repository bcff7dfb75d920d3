"""/docs in a real Chromium that may reach nothing but the service: Swagger UI renders from the
service's own files (app/api/docs.py), as on an offline laptop or a pod without internet access."""

from __future__ import annotations

import pytest

from tests.app.live_server import LiveServer

pytestmark = pytest.mark.browser


def test_the_api_docs_render_with_no_other_host_reachable(browser, live_service: LiveServer):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    elsewhere: list[str] = []

    def only_the_service(route) -> None:
        if route.request.url.startswith(live_service.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_service)
    page.goto(live_service.url + "/docs", wait_until="load")
    page.get_by_text("/v1/generate").first.wait_for(timeout=20_000)
    assert elsewhere == []
    page.close()
