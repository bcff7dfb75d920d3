"""UI results name their image without the server's directories, and the page's link still serves it."""

from __future__ import annotations

import json

import httpx

from tests.app.ui_protocol import ui_generate


def test_a_ui_result_does_not_reveal_the_servers_directories(live_service):
    message = ui_generate(live_service.url, prompt="a lighthouse")
    assert message["success"], message
    image = message["output"]["data"][0]
    assert not image["path"].startswith("/"), image
    assert image["path"].endswith("/image.png")
    assert f"/{image['path']}" not in json.dumps(message)  # no directory in front of it, anywhere
    assert image["url"] == f"{live_service.url}/gradio_api/file={image['path']}"
    served = httpx.get(image["url"], timeout=10)
    assert served.status_code == 200
    assert served.content.startswith(b"\x89PNG")


def test_a_relative_file_link_cannot_leave_the_cache(live_service):
    escape = "..%2F..%2F..%2F..%2Fetc%2Fhostname"  # encoded: httpx would fold a plain "../"
    response = httpx.get(f"{live_service.url}/gradio_api/file={escape}", timeout=10)
    assert response.status_code == 403
    assert "/etc/hostname" not in response.text.replace("../", "")
