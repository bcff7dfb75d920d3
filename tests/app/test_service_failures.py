"""Failures around the model, through a live server with a stand-in backend (no torch model needed)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.app.fakes import FakeBackend
from tests.app.live_server import serve


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory):
    backend = FakeBackend()
    with serve(
        tmp_path_factory.mktemp("unused"),
        loader=lambda _settings: backend,
        ui=False,
        request_timeout_s=0.5,
        queue_size=2,
        max_batch_size=1,
    ) as live:
        yield live, backend


def test_an_internal_failure_is_a_500_with_an_error_id_and_the_service_keeps_serving(fake_server):
    live, _ = fake_server
    failed = httpx.post(f"{live.url}/v1/generate", json={"prompt": "explode"})
    assert failed.status_code == 500
    body = failed.json()
    assert body["error"] == "internal error while generating"
    assert len(body["error_id"]) == 12
    assert "Traceback" not in failed.text
    assert httpx.post(f"{live.url}/v1/generate", json={"prompt": "fine"}).status_code == 200
    assert httpx.get(f"{live.url}/readiness").status_code == 200


def test_a_request_past_its_deadline_is_a_504_and_a_full_queue_a_429(fake_server):
    live, backend = fake_server
    backend.release.clear()  # the pipeline hangs: one request runs, two wait, the rest are refused

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
            calls = [client.post("/v1/generate", json={"prompt": f"p{i}", "seed": i}) for i in range(6)]
            return await asyncio.gather(*calls)

    try:
        responses = asyncio.run(burst())
    finally:
        backend.release.set()
    statuses = sorted(r.status_code for r in responses)
    assert 429 in statuses and 504 in statuses
    assert set(statuses) <= {429, 504}
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert "queue is full" in refused.json()["error"]
    assert "no image within" in next(r for r in responses if r.status_code == 504).json()["error"]
    # The departed requests' slots are not spent on them later: the service is free again.
    assert httpx.post(f"{live.url}/v1/generate", json={"prompt": "after"}, timeout=30).status_code == 200
    info = httpx.get(f"{live.url}/v1/info").json()
    assert info["batching"]["dropped_before_running"] >= 1


def test_ui_can_be_switched_off(fake_server):
    live, _ = fake_server
    assert httpx.get(f"{live.url}/").status_code == 404
