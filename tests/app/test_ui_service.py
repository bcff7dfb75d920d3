"""The UI through Gradio's own protocol: one queue bound with the API, API-grade validation and
errors, no tracebacks in the log stream, and generated files that do not pile up on disk."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.app.held import finish, hold_the_pipeline, post_and_leave_open, wait_until
from tests.app.ui_protocol import generate_dependency, ui_error, ui_generate, ui_generate_async


def test_the_ui_and_the_api_share_one_queue_bound(held_service):
    live, backend = held_service
    capacity = live.settings.queue_size
    blocker = hold_the_pipeline(live, backend)
    parked = []
    try:
        # Fill the queue from the UI side: a request in the queue, the rest of the bound from the API.
        parked = [post_and_leave_open(live.url, f"api {i}") for i in range(capacity - 1)]
        wait_until(lambda: live.service.batcher.depth == capacity - 1)

        async def ui_then_api() -> tuple[list[str | None], httpx.Response]:
            first = asyncio.to_thread(ui_generate, live.url, prompt="fills the last slot")
            task = asyncio.ensure_future(first)
            await asyncio.to_thread(wait_until, lambda: live.service.batcher.depth == capacity)
            more_ui = await asyncio.to_thread(ui_generate, live.url, prompt="one too many")
            async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
                api = await client.post("/v1/generate", json={"prompt": "one too many"})
            backend.release.set()
            return [ui_error(more_ui), ui_error(await task)], api

        (refused_ui, admitted_ui), api = asyncio.run(ui_then_api())
    finally:
        finish(blocker, backend)
        for sock in parked:
            sock.close()
    assert refused_ui == "The service is busy (its queue is full); try again in a moment."
    assert admitted_ui is None
    assert api.status_code == 429


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"steps": 2.7}, "invalid request: steps: Input should be a valid integer"),
        ({"prompt": None}, "invalid request: prompt: Input should be a valid string"),
        ({"prompt": "   "}, "prompt must not be empty"),
        ({"seed": 1.5}, "invalid request: seed: Input should be a valid integer"),
        ({"width": 100}, "invalid request: width: Input should be a multiple of 8"),
        # Values of the wrong type or past a slider's end, as a script could send them: the API's
        # message, not Gradio's bare "Error", and no "['a fox']" prompt made up from a list.
        ({"prompt": ["a fox"]}, "invalid request: prompt: Input should be a valid string"),
        ({"steps": "many"}, "invalid request: steps: Input should be a valid integer"),
        ({"steps": 9}, "invalid request: steps: Input should be less than or equal to 8"),
        ({"seed": "seven"}, "invalid request: seed: Input should be a valid integer"),
        ({"seed": [7]}, "invalid request: seed: Input should be a valid integer"),
        ({"width": {"x": 1}}, "invalid request: width: Input should be a valid integer"),
    ],
)
def test_the_ui_validates_like_the_api_with_readable_messages(held_service, values, message):
    live, backend = held_service
    batches = len(backend.batches)
    error = ui_error(ui_generate(live.url, **{"prompt": "a fox", **values}))
    assert error is not None and error.startswith(message)
    assert len(backend.batches) == batches  # nothing reached the pipeline


def test_a_ui_failure_has_an_error_id_a_log_line_a_metric_and_no_traceback(held_service, caplog, capfd):
    live, _ = held_service
    caplog.set_level("INFO", logger="app")
    requests_before = len(live.service.metrics._values["Requests"])
    errors_before = sum(live.service.metrics._values["Errors"])
    capfd.readouterr()
    error = ui_error(ui_generate(live.url, prompt="explode"))
    assert error is not None and error.startswith("Internal error while generating (error id ")
    error_id = error.removeprefix("Internal error while generating (error id ")[:12]
    (line,) = [r for r in caplog.records if r.name == "app.ui" and r.getMessage() == "request"][-1:]
    assert (line.status, line.error_id) == (500, error_id)
    assert len(live.service.metrics._values["Requests"]) == requests_before + 1
    assert sum(live.service.metrics._values["Errors"]) == errors_before + 1
    # Gradio prints tracebacks of the errors it sees to stderr; the log stream must stay JSON lines.
    assert "Traceback" not in capfd.readouterr().err


def test_the_ui_generated_files_are_deleted(held_service):
    live, _ = held_service
    result = ui_generate(live.url, prompt="a file on disk", seed=3)
    assert result["success"], result
    url = result["output"]["data"][0]["url"]
    assert httpx.get(url, timeout=10).status_code == 200  # the browser fetches it right after the result arrives
    ttl = live.settings.ui_file_ttl_s
    deadline = time.monotonic() + 3 * ttl + 10
    while (expired := httpx.get(url, timeout=10)).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert expired.status_code == 403  # Gradio's answer for a file it no longer has
    path = result["output"]["data"][0]["path"]
    assert path in expired.text and f"/{path}" not in expired.text  # the answer names no directory either


def test_a_burst_of_page_requests_never_meets_gradios_own_queue_bound(held_service):
    live, _backend = held_service
    burst = 4 * live.settings.queue_size

    generate_dependency(live.url)  # before the burst, so that the joins arrive together

    async def press_generate_at_once() -> list[tuple[int, str | None]]:
        async with httpx.AsyncClient(base_url=live.url, timeout=60, limits=httpx.Limits(max_connections=100)) as c:
            return await asyncio.gather(*[ui_generate_async(c, live.url, prompt=f"burst {i}") for i in range(burst)])

    outcomes = asyncio.run(press_generate_at_once())
    # Each request gets an image or the service's own "busy" message; none gets Gradio's 503.
    assert {status for status, _ in outcomes} == {200}, outcomes
    assert {error for _, error in outcomes} <= {None, "The service is busy (its queue is full); try again in a moment."}
