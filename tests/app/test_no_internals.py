"""Responses tell callers nothing about the pod's internals, and other origins get no CORS grant."""

from __future__ import annotations

import time

import httpx
import pytest

from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.settings import load_settings
from tests.app.live_server import TEST_SETTINGS

SECRET_PATH = "/srv/private-models/customer-x/sd-finetune"


def failing_loader(_settings):
    raise FileNotFoundError(f"no model_index.json under s3://internal-bucket{SECRET_PATH}")


def test_a_failed_load_shows_an_error_id_not_the_exception_or_the_model_path(tmp_path, caplog):
    caplog.set_level("ERROR", logger="app.service")
    settings = load_settings(**{**TEST_SETTINGS, "model_cache_dir": tmp_path, "model_id": SECRET_PATH, "ui": False})
    app = create_app(settings, failing_loader)
    with serve_in_thread(app) as url:
        deadline = time.monotonic() + 30
        while app.state.service.load_error_id is None and time.monotonic() < deadline:
            time.sleep(0.05)
        readiness = httpx.get(f"{url}/readiness")
        info = httpx.get(f"{url}/v1/info")
    assert readiness.status_code == 503
    body = readiness.json()
    assert body["status"] == "load failed" and len(body["error_id"]) == 12
    for response in (readiness, info):
        assert "private-models" not in response.text and "internal-bucket" not in response.text
        assert "FileNotFoundError" not in response.text
    assert info.json()["model"] == "sd-finetune"
    assert info.json()["load_error_id"] == body["error_id"]
    (record,) = [r for r in caplog.records if getattr(r, "error_id", None) == body["error_id"]]
    assert "internal-bucket" in str(record.exc_info[1])  # the operator finds it in the log


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:9999", "https://evil.example"])
def test_other_origins_get_no_cors_grant_on_the_api(held_service, origin):
    live, _ = held_service
    preflight = httpx.options(
        f"{live.url}/v1/generate",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    simple = httpx.get(f"{live.url}/v1/info", headers={"Origin": origin})
    for response in (preflight, simple):
        assert "access-control-allow-origin" not in response.headers
        assert "access-control-allow-credentials" not in response.headers
