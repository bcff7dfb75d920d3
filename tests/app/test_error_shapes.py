"""Bad input on every surface (the API, Gradio's routes, the HTTP protocol, image links) is a JSON 4xx."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import serve_jobs


def assert_json_error(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert words in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param("/gradio_api/queue/join", {"fn_index": 999, "data": [], "session_hash": "s1"}, id="join"),
        pytest.param("/gradio_api/queue/join", {"fn_index": 999.0, "data": [], "session_hash": "s1"}, id="join-float"),
        pytest.param("/gradio_api/queue/join", {"fn_index": "999", "data": []}, id="join-string-no-session"),
        pytest.param("/gradio_api/run/predict", {"fn_index": 999, "data": []}, id="predict"),
    ],
)
def test_an_unknown_gradio_function_is_a_422(held_service, path, body):
    live, _ = held_service
    assert_json_error(httpx.post(live.url + path, json=body, timeout=10), 422, "no function 999")


def test_an_unknown_gradio_component_is_a_404(held_service):
    live, _ = held_service
    url = f"{live.url}/gradio_api/component_server"
    fields = {"component_id": 9999, "fn_name": "x", "data": None, "session_hash": "s1"}
    assert_json_error(httpx.post(url, json=fields, timeout=10), 404, "no component 9999")
    form = {"component_id": "9999", "fn_name": "x", "data": "null", "session_hash": "s1"}
    assert_json_error(httpx.post(url, files={"x": ("a", b"")}, data=form, timeout=10), 404, "no component 9999")


def test_a_known_gradio_function_still_reaches_gradio(held_service):
    live, _ = held_service
    config = httpx.get(f"{live.url}/config", timeout=10).json()
    fn_index = next(dep["id"] for dep in config["dependencies"] if dep.get("api_name") == "generate")
    body = {"fn_index": fn_index, "data": ["a fox", "", 1, 7.5, 64, 64, 1], "session_hash": "s2"}
    response = httpx.post(f"{live.url}/gradio_api/queue/join", json=body, timeout=10)
    assert response.status_code == 200 and "event_id" in response.json()


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("GET", "/v1/generate", "POST"), ("DELETE", "/v1/info", "GET"), ("PUT", "/v1/generate", "POST")],
)
def test_a_wrong_method_on_an_api_path_is_a_405_naming_the_right_one(held_service, method, path, allowed):
    live, _ = held_service
    response = httpx.request(method, live.url + path, timeout=10)
    assert_json_error(response, 405, f"use {allowed}")
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize("path", ["/v1/nothing-here", "/v1/generate/extra", "/v1"])
def test_an_unknown_api_path_is_a_404_in_the_api_shape(held_service, path):
    live, _ = held_service
    assert_json_error(httpx.get(live.url + path, timeout=10), 404, "no API path")


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GARBAGE\r\n\r\n", id="no request line"),
        pytest.param(b"GET /health HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", id="header without colon"),
        pytest.param(b"GET /health HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", id="bad length"),
        pytest.param(
            b"POST /v1/generate HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", id="bad chunk"
        ),
    ],
)
def test_a_malformed_request_is_a_json_400(held_service, request_bytes):
    live, _ = held_service
    parts = urlsplit(live.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request_bytes)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"] == "malformed HTTP request"


@pytest.fixture(scope="module")
def jobs_server(tmp_path_factory):
    backend = FakeBackend()
    with serve_jobs(tmp_path_factory.mktemp("links"), lambda _s: backend) as live:
        yield live


@pytest.mark.parametrize("signature", ["é", "%C3%A9" * 3, "ü" * 64, "0" * 64])
def test_an_image_link_with_a_bad_signature_is_a_403(jobs_server, signature):
    job_id = "0123456789abcdef0123456789abcdef"
    url = f"{jobs_server.url}/v1/jobs/{job_id}/image"
    response = httpx.get(url, params={"expires": "99999999999", "signature": signature}, timeout=10)
    assert_json_error(response, 403, "invalid or has expired")
