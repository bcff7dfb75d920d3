"""Work nobody will receive stops between denoising steps: a timed-out or abandoned request frees the worker."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.app.fakes import FakeBackend
from tests.app.held import finish, hold_the_pipeline, info, wait_until
from tests.app.live_server import LiveServer, serve

STEP_S = 0.02  # the stand-in backend's time per step


def post_raw(url: str, body: dict) -> socket.socket:
    """Send a whole /v1/generate request on a raw socket and leave the answer unread."""
    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port))
    head = (
        f"POST /v1/generate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    )
    sock.sendall(head.encode() + b"\r\n" + payload)
    return sock


def stopped(live: LiveServer) -> int:
    return info(live)["batching"]["batches_stopped_unanswered"]


def test_a_request_past_its_deadline_stops_the_real_pipeline_and_frees_the_worker(live_service, tmp_path):
    """The issue's case: one legal large request must not make the small ones behind it time out too."""
    with (
        serve(live_service.settings.model_cache_dir, request_timeout_s=4.0, max_steps=500, max_batch_size=1) as live,
        httpx.Client(base_url=live.url, timeout=60) as client,
    ):
        large = client.post("/v1/generate", json={"prompt": "large", "steps": 500, "width": 128, "height": 128})
        assert large.status_code == 504
        timed_out_at = time.monotonic()
        small = client.post("/v1/generate", json={"prompt": "small", "steps": 2, "seed": 1})
        assert small.status_code == 200, small.text
        assert stopped(live) == 1
        assert time.monotonic() - timed_out_at < 4.0


@pytest.fixture(scope="module")
def batching_server(tmp_path_factory):
    """A stand-in backend that takes STEP_S per step; two requests per batch."""
    backend = FakeBackend(delay_s=STEP_S)
    with serve(
        tmp_path_factory.mktemp("unused"), lambda _s: backend, max_batch_size=2, max_steps=999, batch_wait_ms=0
    ) as live:
        yield live, backend


def start_batch_of_two(live: LiveServer, backend: FakeBackend, steps: int) -> list[socket.socket]:
    """Two compatible requests, queued behind a held request so that they share the next batch; returns
    once that batch is inside the pipeline call."""
    batches_before = len(backend.batches)
    blocker = hold_the_pipeline(live, backend)
    clients = [post_raw(live.url, {"prompt": f"member {i}", "steps": steps, "seed": i}) for i in range(2)]
    wait_until(lambda: live.service.batcher.depth == 2)
    finish(blocker, backend)
    wait_until(lambda: len(backend.batches) == batches_before + 2)
    # Both in one batch, in whichever order the server read them.
    assert sorted(p.prompt for p in backend.batches[-1]) == ["member 0", "member 1"]
    return clients


def test_a_batch_runs_on_while_one_of_its_requests_still_waits(batching_server):
    live, backend = batching_server
    before = stopped(live)
    leaver, stayer = start_batch_of_two(live, backend, steps=100)
    leaver.close()
    stayer.settimeout(60)
    answer = stayer.recv(65536)
    stayer.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert stopped(live) == before


def test_a_batch_whose_requests_all_left_stops_between_steps(batching_server):
    live, backend = batching_server
    before = stopped(live)
    steps = 999  # 20 s of work if it ran to the end
    for sock in start_batch_of_two(live, backend, steps=steps):
        sock.close()
    left_at = time.monotonic()
    wait_until(lambda: live.service.batcher.in_flight == 0, timeout_s=steps * STEP_S)
    assert time.monotonic() - left_at < steps * STEP_S / 4
    assert stopped(live) == before + 1
    with httpx.Client(base_url=live.url, timeout=60) as client:
        assert client.post("/v1/generate", json={"prompt": "next", "steps": 2}).status_code == 200
