"""Gradio's routes that neither the page nor gradio_client uses answer 404 through the real HTTP stack."""

from __future__ import annotations

import httpx
import pytest

from app.ui_routes import ui_route_allowed

UNUSED = [
    ("GET", "/gradio_api/dev/reload"),  # a never-ending stream outside dev mode
    ("GET", "/monitoring"),
    ("GET", "/monitoring/summary"),
    ("GET", "/gradio_api/startup-events"),
    ("GET", "/gradio_api/runs"),
    ("GET", "/gradio_api/openapi.json"),
    ("GET", "/gradio_api/heartbeat/abc"),
    ("GET", "/gradio_api/queue/status"),
    ("GET", "/gradio_api/upload_progress"),
    ("GET", "/manifest.json"),
    ("GET", "/robots.txt"),
    ("GET", "/pwa_icon"),
    ("POST", "/gradio_api/call/generate"),
    ("POST", "/gradio_api/api/generate"),
    ("POST", "/gradio_api/run/generate"),
    ("POST", "/gradio_api/cancel"),
    ("POST", "/gradio_api/reset"),
    ("POST", "/gradio_api/vibe-edit"),
    ("POST", "/login"),
    ("GET", "/gradio_api/proxy=http://169.254.169.254/latest/meta-data/"),
    ("GET", "/svelte/x.js"),
    ("GET", "/config/"),
]


@pytest.mark.parametrize(("method", "path"), UNUSED, ids=[f"{m} {p}" for m, p in UNUSED])
def test_routes_the_ui_does_not_use_answer_404(held_service, method: str, path: str):
    live, _backend = held_service
    assert not ui_route_allowed(method, path)
    # A stream would not end: read the status line and headers only, with a deadline.
    with httpx.stream(method, live.url + path, json={} if method == "POST" else None, timeout=5) as response:
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/json"
        assert response.read() == b'{"error": "not found"}'


def test_screen_recordings_are_not_processed(held_service):
    live, _backend = held_service
    video = {"video": ("a.webm", b"\x1aE\xdf\xa3 not a video")}
    response = httpx.post(live.url + "/gradio_api/process_recording", files=video, timeout=10)
    assert response.status_code == 404
    assert response.json() == {"error": "not found"}


def test_queued_events_cannot_skip_the_queue(held_service):
    live, _backend = held_service
    config = httpx.get(live.url + "/config", timeout=10).json()
    (generate,) = [d["id"] for d in config["dependencies"] if d.get("api_name") == "generate"]
    response = httpx.post(
        live.url + "/gradio_api/run/predict", json={"data": ["a fox"] + [None] * 6, "fn_index": generate}, timeout=10
    )
    assert response.status_code == 404
    assert "join the queue" in response.text


def test_a_known_route_with_another_method_is_405(held_service):
    live, _backend = held_service
    response = httpx.delete(live.url + "/gradio_api/queue/join", timeout=10)
    assert response.status_code == 405
    assert response.json() == {"error": "DELETE is not allowed on /gradio_api/queue/join; use POST"}


def test_the_page_and_its_parts_still_load(held_service):
    live, _backend = held_service
    page = httpx.get(live.url + "/", timeout=10)
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert httpx.get(live.url + "/config", timeout=10).status_code == 200
    assert httpx.get(live.url + "/theme.css", timeout=10).status_code == 200
    assert httpx.get(live.url + "/gradio_api/info", timeout=10).status_code == 200


@pytest.mark.parametrize(("method", "path", "allow"), [("TRACE", "/v1/generate", "POST"), ("POST", "/health", "GET")])
def test_another_method_on_an_api_route_is_405_with_allow(held_service, method: str, path: str, allow: str):
    # Every request no API route takes reaches the UI's mount; an API path asked with another method
    # still gets 405 (schemathesis checks it for every operation).
    live, _backend = held_service
    response = httpx.request(method, live.url + path, timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json() == {"error": f"{method} is not allowed on {path}; use {allow}"}
