"""The gateway reaching its engine over a Unix socket (UPSTREAM_URL=unix:/path), as on its pod, where vLLM listens
with --uds: answers and their token counts as over TCP, the pool's connections kept, and an engine whose socket is
not there yet (vLLM still loading, or restarting) a 503 the client can retry, never a 500. Real processes: the
gateway, and the stand-in engine listening on the socket."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.llm.stack import run_gateway, run_standin

COMPLETION = {"model": "standin", "prompt": "a b c", "max_tokens": 5}


@pytest.fixture
def socket_path() -> Iterator[Path]:
    """A socket path in a short private folder (a Unix socket path is at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="engine-") as folder:
        yield Path(folder) / "vllm.sock"


def test_streams_and_whole_answers_go_through_the_socket(socket_path: Path, tmp_path: Path) -> None:
    with (
        run_standin(uds=str(socket_path)) as (_, engine),
        run_gateway(f"unix:{socket_path}", tmp_path) as gateway,
    ):
        assert httpx.get(f"{gateway.url}/readiness", timeout=30).status_code == 200
        opened = engine.connections
        whole = httpx.post(f"{gateway.url}/v1/completions", json=COMPLETION, timeout=30)
        assert whole.status_code == 200 and whole.json()["usage"]["completion_tokens"] == 5
        with httpx.stream(
            "POST", f"{gateway.url}/v1/completions", json={**COMPLETION, "stream": True}, timeout=30
        ) as stream:
            events = [line for line in stream.iter_lines() if line.startswith("data: ")]
        assert len(events) == 6 and events[-1] == "data: [DONE]"
        # One kept-alive connection carried the probe's and both answers' requests.
        assert engine.connections - opened <= 1
        records = gateway.wait_record(2)
    assert [(r["status"], r["stream"], r["completion_tokens"]) for r in records] == [(200, False, 5), (200, True, 5)]


def test_an_engine_not_listening_yet_is_a_503_to_retry_and_then_served(socket_path: Path, tmp_path: Path) -> None:
    with run_gateway(f"unix:{socket_path}", tmp_path) as gateway:
        readiness = httpx.get(f"{gateway.url}/readiness", timeout=30)
        assert readiness.status_code == 503 and "does not answer yet" in readiness.json()["error"]["message"]
        refused = httpx.post(f"{gateway.url}/v1/completions", json=COMPLETION, timeout=30)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert "not reachable (UnixClientConnectorError)" in refused.json()["error"]["message"]
        with run_standin(uds=str(socket_path)):
            assert httpx.get(f"{gateway.url}/readiness", timeout=30).status_code == 200
            assert httpx.post(f"{gateway.url}/v1/completions", json=COMPLETION, timeout=30).status_code == 200
