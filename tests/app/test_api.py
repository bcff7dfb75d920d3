"""The API through a real uvicorn server with the built-in model."""

from __future__ import annotations

import base64
import io

import httpx
import pytest
from PIL import Image

from common.version import VERSION
from tests.app.live_server import LiveServer


@pytest.fixture
def client(live_service: LiveServer):
    with httpx.Client(base_url=live_service.url, timeout=60) as c:
        yield c


def generate(client: httpx.Client, **body: object) -> httpx.Response:
    return client.post("/v1/generate", json={"prompt": "a lighthouse at dusk", "steps": 2, **body})


def test_generate_returns_a_png_of_the_requested_size(client):
    response = generate(client, width=64, height=128, seed=3)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG"
    assert image.size == (64, 128)
    assert response.headers["x-seed"] == "3"
    assert response.headers["x-backend"] == "cpu"
    assert float(response.headers["x-latency-ms"]) > 0


def test_same_seed_gives_the_same_bytes_and_another_seed_does_not(client):
    first = generate(client, seed=42)
    second = generate(client, seed=42)
    other = generate(client, seed=43)
    assert first.status_code == second.status_code == other.status_code == 200
    assert first.content == second.content
    assert first.content != other.content


def test_default_size_and_random_seed_come_back_in_headers(client, live_service: LiveServer):
    response = generate(client)
    assert response.status_code == 200
    image = Image.open(io.BytesIO(response.content))
    assert image.size == (live_service.settings.default_width, live_service.settings.default_height)
    assert 0 <= int(response.headers["x-seed"]) < 2**32


def test_json_accept_returns_base64_png(client):
    response = client.post(
        "/v1/generate", json={"prompt": "a fox", "steps": 2, "seed": 5}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["seed"] == 5 and body["backend"] == "cpu" and body["batch_size"] >= 1
    assert Image.open(io.BytesIO(base64.b64decode(body["image_base64"]))).size == (64, 64)


def test_readiness_was_503_until_the_model_loaded_then_200(client, live_service: LiveServer):
    assert live_service.health_before_load == 200
    assert live_service.readiness_before_load == 503
    assert client.get("/readiness").status_code == 200
    assert client.get("/health").json() == {"status": "ok"}


def test_info_names_the_backend_model_and_limits(client):
    info = client.get("/v1/info").json()
    assert info["backend"] == "cpu"
    assert info["device"] == "cpu"
    assert info["model"] == "builtin:tiny"
    assert info["demo_model"] is True
    assert info["native_size"] == {"width": 256, "height": 256}
    assert info["limits"]["max_steps"] == 8
    assert "torch" in info["versions"]
    assert info["version"] == VERSION  # the project's, from common/version.py


def test_openapi_states_the_deployment_bounds_and_docs_are_served(client):
    schema = client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["GenerateRequest"]["properties"]
    assert request["steps"]["anyOf"][0]["maximum"] == 8
    assert request["width"]["anyOf"][0]["multipleOf"] == 8
    assert set(schema["paths"]) >= {"/v1/generate", "/v1/info", "/health", "/readiness"}
    assert client.get("/docs").status_code == 200


def test_ui_is_served_at_the_root(client):
    response = client.get("/")
    assert response.status_code == 200
    assert "<html" in response.text.lower()


def test_each_api_request_is_one_json_log_line(client, caplog):
    import json

    from common.logs import JsonFormatter

    caplog.set_level("INFO", logger="app.requests")
    assert generate(client, seed=1).status_code == 200
    (record,) = [r for r in caplog.records if r.name == "app.requests" and getattr(r, "path", "") == "/v1/generate"]
    line = json.loads(JsonFormatter().format(record))
    assert line["status"] == 200 and line["backend"] == "cpu" and line["batch_size"] == 1
    assert line["latency_ms"] > 0 and line["method"] == "POST"
