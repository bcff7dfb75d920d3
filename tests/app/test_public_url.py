"""Behind CloudFront the ALB tells the pod X-Forwarded-Proto: http; with PUBLIC_URL set the UI still
builds its links on the public https URL (else the browser blocks them as mixed content)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.app.fakes import FakeBackend
from tests.app.live_server import serve

PUBLIC = "https://d111111abcdef8.cloudfront.net"


def _root(url: str) -> str:
    headers = {"x-forwarded-proto": "http", "host": "d111111abcdef8.cloudfront.net"}
    with httpx.Client(base_url=url, timeout=30) as client:
        response = client.get("/config", headers=headers)
        assert response.status_code == 200, response.text
        return response.json()["root"]


def test_the_ui_links_to_the_public_https_url(tmp_path: Path):
    with serve(tmp_path, lambda _s: FakeBackend(), public_url=PUBLIC) as live:
        assert _root(live.url) == PUBLIC


def test_without_a_public_url_the_ui_follows_the_request(tmp_path: Path):
    with serve(tmp_path, lambda _s: FakeBackend()) as live:
        assert _root(live.url) == "http://d111111abcdef8.cloudfront.net"
