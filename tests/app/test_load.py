"""A bounded load run on loopback: more concurrent clients than the queue holds."""

from __future__ import annotations

import asyncio

import httpx

from tests.app.live_server import LiveServer

CLIENTS = 24  # the test server's queue holds 8


async def _one(client: httpx.AsyncClient, seed: int) -> int:
    response = await client.post("/v1/generate", json={"prompt": "load", "steps": 2, "seed": seed})
    if response.status_code == 429:
        assert int(response.headers["retry-after"]) >= 1
    return response.status_code


async def _burst(url: str) -> list[int]:
    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        return await asyncio.gather(*(_one(client, seed) for seed in range(CLIENTS)))


def test_overload_gives_only_200_or_429_forms_batches_and_respects_the_queue_bound(live_service: LiveServer):
    before = httpx.get(f"{live_service.url}/v1/info").json()["batching"]["batches_by_size"]
    statuses = asyncio.run(_burst(live_service.url))
    after = httpx.get(f"{live_service.url}/v1/info").json()["batching"]

    assert len(statuses) == CLIENTS  # nothing lost: every request got an answer
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= live_service.settings.queue_size
    new_batches = {int(size): n - before.get(size, 0) for size, n in after["batches_by_size"].items()}
    assert any(size > 1 and n > 0 for size, n in new_batches.items()), new_batches
    assert max(new_batches) <= live_service.settings.max_batch_size
    assert after["max_queue_depth_seen"] <= live_service.settings.queue_size
    assert httpx.get(f"{live_service.url}/readiness").status_code == 200
