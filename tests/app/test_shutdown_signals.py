"""Stopping takes at most SHUTDOWN_GRACE_S, however long the job worker's poll is: an idle service stops at
once, a busy one within the grace, and Ctrl-C on `make run` says it is stopping and ends without a traceback."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.server import create_app
from app.settings import load_settings
from common.http.protocol import server_config
from common.http.server import DrainingServer
from tests.app.fakes import FakeBackend
from tests.app.live_server import TEST_SETTINGS
from tests.support.app_process import run_app

POLL_S = 10.0  # the job worker's long poll (the default): what the old shutdown sat out


@contextmanager
def draining_service(tmp_path: Path, backend: FakeBackend, **overrides: object) -> Iterator[tuple[DrainingServer, str]]:
    """The app with local jobs under `python -m app`'s DrainingServer, in a thread; the test plays the
    signal by calling `handle_exit` (signals reach only the main thread)."""
    settings = load_settings(
        **{
            **TEST_SETTINGS,
            "model_cache_dir": tmp_path / "models",
            "jobs": "local",
            "jobs_dir": tmp_path / "jobs",
            "jobs_poll_s": POLL_S,
            "ui": False,
            **overrides,
        }
    )
    app = create_app(settings, lambda _s: backend)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = DrainingServer(server_config(app, settings, lifespan="on"), app.state.service, settings.shutdown_grace_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        deadline = time.monotonic() + 60
        while not server.started or httpx.get(f"{url}/readiness", timeout=5).status_code != 200:
            assert time.monotonic() < deadline and thread.is_alive(), "not ready"
            time.sleep(0.05)
        time.sleep(0.5)  # the job worker is inside its long poll now
        server.thread = thread  # type: ignore[attr-defined]
        yield server, url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def stop_and_time(server: DrainingServer) -> float:
    """SIGTERM; seconds until the server (and `asyncio.run` around it) has finished."""
    started = time.monotonic()
    server.handle_exit(signal.SIGTERM, None)
    server.thread.join(timeout=60)  # type: ignore[attr-defined]
    assert not server.thread.is_alive()  # type: ignore[attr-defined]
    return time.monotonic() - started


def test_an_idle_service_stops_at_once_whatever_the_job_poll(tmp_path, caplog):
    caplog.set_level("INFO", logger="common.http.server")
    with draining_service(tmp_path, FakeBackend(), shutdown_grace_s=30) as (server, _):
        elapsed = stop_and_time(server)
    assert elapsed < 1.5, f"{elapsed:.1f} s"
    assert [r.signal for r in caplog.records if r.getMessage() == "stopping"] == ["SIGTERM"]


def test_a_service_with_a_job_running_stops_within_a_short_grace(tmp_path):
    grace_s = 2.0
    backend = FakeBackend(delay_s=0.05)  # 200 steps: 10 s of work, far past the grace
    with draining_service(tmp_path, backend, shutdown_grace_s=grace_s, max_steps=200) as (server, url):
        job = httpx.post(f"{url}/v1/jobs", json={"prompt": "long", "steps": 200}, timeout=10).json()
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/v1/jobs/{job['id']}", timeout=10).json()["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        elapsed = stop_and_time(server)
    assert elapsed < grace_s + 1.0, f"{elapsed:.1f} s against a grace of {grace_s:g} s"


def test_ctrl_c_on_an_idle_service_says_it_stops_and_ends_at_once_without_a_traceback(tmp_path):
    """`make run`: `python -m app` with its defaults (local jobs, a 10 s long poll), then Ctrl-C."""
    env = {"MODEL_CACHE_DIR": str(tmp_path), "UI": "false", "JOBS_DIR": str(tmp_path / "jobs")}
    with run_app(env) as (process, _):
        time.sleep(0.5)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        elapsed = time.monotonic() - started
    _, stderr = process.communicate()
    assert elapsed < 3.0, f"{elapsed:.1f} s"
    assert process.returncode == 130
    assert '"message": "stopping", "signal": "SIGINT"' in stderr
    assert "Traceback" not in stderr
