"""SIGTERM through `python -m app`: readiness 503, new work refused, in-flight work finishes, exit."""

from __future__ import annotations

import signal
import threading
import time

import httpx

from tests.app.held import wait_until
from tests.support.app_process import run_app


def has_work(url: str, *, running: int, waiting: int) -> bool:
    """Whether the service has started `running` batches and holds `waiting` requests in its queue (GET /v1/info):
    a fixed sleep after the clients start is too short when the machine is busy."""
    batching = httpx.get(f"{url}/v1/info", timeout=10).json()["batching"]
    return sum(batching["batches_by_size"].values()) >= running and batching["queue_depth"] >= waiting


def test_sigterm_drains_then_exits(tmp_path):
    env = {
        "MODEL_CACHE_DIR": str(tmp_path),
        "UI": "false",
        "METRICS": "emf",
        "METRICS_FLUSH_S": "60",
        # Generous limits: this test checks the order of events, not speed, on a possibly busy machine.
        "SHUTDOWN_GRACE_S": "600",
        "REQUEST_TIMEOUT_S": "600",
    }
    with run_app(env) as (process, url):
        # A slow request (many steps at full size) is in flight when SIGTERM arrives.
        in_flight: list[httpx.Response] = []
        slow = threading.Thread(
            target=lambda: in_flight.append(
                httpx.post(f"{url}/v1/generate", json={"prompt": "slow", "steps": 60, "seed": 1}, timeout=600)
            )
        )
        slow.start()
        wait_until(lambda: has_work(url, running=1, waiting=0), timeout_s=120)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        readiness = httpx.get(f"{url}/readiness")
        refused = httpx.post(f"{url}/v1/generate", json={"prompt": "late", "steps": 2})
        slow.join(timeout=600)
        process.wait(timeout=600)
    stdout, stderr = process.communicate()

    assert readiness.status_code == 503 and readiness.json()["status"] == "draining"
    assert refused.status_code == 503 and "shutting down" in refused.json()["error"]
    assert in_flight and in_flight[0].status_code == 200  # the in-flight request finished
    assert process.returncode == 0  # a clean stop, although uvicorn re-raises the SIGTERM it handled
    assert '"message": "draining", "in_flight": 1' in stderr  # SIGTERM came while it was running
    # METRICS=emf: the final flush on shutdown wrote the requests as an EMF line on stdout.
    assert '"CloudWatchMetrics"' in stdout and '"Requests"' in stdout


def test_shutdown_takes_one_grace_period_and_cut_requests_get_a_json_error(tmp_path):
    grace_s = 20
    env = {
        "MODEL_CACHE_DIR": str(tmp_path),
        "UI": "false",
        "SHUTDOWN_GRACE_S": str(grace_s),
        "REQUEST_TIMEOUT_S": "600",
        "MAX_BATCH_SIZE": "1",
        "MAX_STEPS": "999",
    }
    with run_app(env) as (process, url):
        # Far more work than the grace allows: one long request runs, two wait behind it (512 px is the largest
        # size the built-in tiny model's family bounds admit).
        answers: list[httpx.Response] = []
        big = {"prompt": "slow", "steps": 999, "width": 512, "height": 512, "seed": 1}
        clients = [
            threading.Thread(target=lambda: answers.append(httpx.post(f"{url}/v1/generate", json=big, timeout=600)))
            for _ in range(3)
        ]
        for client in clients:
            client.start()
        wait_until(lambda: has_work(url, running=1, waiting=2), timeout_s=120)
        sigterm_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10 * grace_s)
        exited_after_s = time.monotonic() - sigterm_at
        for client in clients:
            client.join(timeout=60)
    process.communicate()

    # One grace period in total (plus process exit), not the drain's grace and then uvicorn's again.
    assert exited_after_s < grace_s + 8
    assert len(answers) == 3
    for answer in answers:
        assert answer.status_code == 503 and answer.headers["content-type"] == "application/json"
        assert len(answer.json()["error_id"]) == 12 and "shut down" in answer.json()["error"]
