"""A client that leaves takes its request with it: it never reaches the pipeline and is not a 200."""

from __future__ import annotations

import pytest

from tests.app.held import finish, hold_the_pipeline, info, post_and_leave_open, wait_until
from tests.app.ui_protocol import ui_event_stream


@pytest.fixture
def held_server(held_service):
    """The session's service whose pipeline can be held, so requests stay queued while the test acts."""
    return held_service


def test_api_requests_abandoned_in_the_queue_never_run_and_are_logged_as_499(held_server, caplog):
    live, backend = held_server
    caplog.set_level("INFO", logger="app.requests")
    before = info(live)["batching"]
    batches_before = len(backend.batches)
    blocker = hold_the_pipeline(live, backend)
    try:
        leavers = [post_and_leave_open(live.url, f"abandoned {i}") for i in range(3)]
        wait_until(lambda: live.service.batcher.depth == 3)
        for sock in leavers:
            sock.close()
        wait_until(lambda: info(live)["batching"]["cancelled_by_client"] == before["cancelled_by_client"] + 3)
        assert live.service.batcher.depth == 0  # out of the queue at once, not when the worker gets there
    finally:
        finish(blocker, backend)
    ran = [p.prompt for batch in backend.batches[batches_before:] for p in batch]
    assert ran == ["blocker"]
    statuses = [r.status for r in caplog.records if r.name == "app.requests" and r.path == "/v1/generate"]
    assert statuses.count(499) == 3 and 200 not in statuses[:3]


def test_ui_requests_abandoned_by_the_page_never_run(held_server):
    live, backend = held_server
    before = info(live)["batching"]["cancelled_by_client"]
    batches_before = len(backend.batches)
    blocker = hold_the_pipeline(live, backend)
    try:
        with ui_event_stream(live.url, prompt="abandoned in the UI") as messages:
            for message in messages:
                if message["msg"] == "progress":  # our handler runs: the request is in the queue
                    break
            wait_until(lambda: live.service.batcher.depth == 1)
        # The page is closed: within a few seconds the request leaves the queue, counted as cancelled.
        wait_until(lambda: info(live)["batching"]["cancelled_by_client"] == before + 1, timeout_s=30)
        assert live.service.batcher.depth == 0
    finally:
        finish(blocker, backend)
    ran = [p.prompt for batch in backend.batches[batches_before:] for p in batch]
    assert ran == ["blocker"]
