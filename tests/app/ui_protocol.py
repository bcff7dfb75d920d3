"""Talk to the Gradio UI the way its page does: join the queue, then read the event stream (SSE)."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

FIELDS = ("prompt", "negative_prompt", "steps", "guidance_scale", "width", "height", "seed", "loras", "lora_scale")
DEFAULTS: dict[str, Any] = {
    "negative_prompt": "",
    "steps": 2,
    "guidance_scale": 7.5,
    "width": 64,
    "height": 64,
    "loras": [],
    "lora_scale": 1.0,
}


@functools.cache
def generate_dependency(url: str) -> dict[str, Any]:
    """The event the page's Generate button (elem_id "generate") fires (asked once per server)."""
    config = httpx.get(f"{url}/config", timeout=30).json()
    (button,) = [c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "generate"]
    return next(d for d in config["dependencies"] if [button, "click"] in d["targets"])


@contextmanager
def ui_event_stream(url: str, raw_data: list[Any] | None = None, **values: Any) -> Iterator[Iterator[dict[str, Any]]]:
    """Press Generate with `values` (the UI's fields; missing ones take the page's defaults) and yield
    the stream of Gradio messages; leaving the block closes the stream, as closing the page does.
    `raw_data` replaces the whole list of values (for payloads the page never sends)."""
    dependency = generate_dependency(url)
    session = uuid.uuid4().hex
    data = raw_data if raw_data is not None else [{**DEFAULTS, "seed": None, **values}.get(name) for name in FIELDS]
    joined = httpx.post(
        f"{url}/gradio_api/queue/join",
        json={
            "data": data,
            "fn_index": dependency["id"],
            "trigger_id": dependency["targets"][0][0],
            "session_hash": session,
            "event_data": None,
        },
        timeout=30,
    )
    joined.raise_for_status()
    with httpx.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=60) as stream:

        def messages() -> Iterator[dict[str, Any]]:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    yield json.loads(line.removeprefix("data:"))

        yield messages()


def ui_generate(url: str, raw_data: list[Any] | None = None, **values: Any) -> dict[str, Any]:
    """Press Generate and return Gradio's final message (`success`, `output`)."""
    with ui_event_stream(url, raw_data, **values) as messages:
        for message in messages:
            if message["msg"] == "process_completed":
                return message
    raise AssertionError("the event stream ended without a result")


async def ui_generate_async(client: httpx.AsyncClient, url: str, **values: Any) -> tuple[int, str | None]:
    """Press Generate from an async client: (status of the queue join, the page's error or None)."""
    dependency = generate_dependency(url)
    session = uuid.uuid4().hex
    data = [{**DEFAULTS, "seed": None, **values}.get(name) for name in FIELDS]
    joined = await client.post(
        f"{url}/gradio_api/queue/join",
        json={
            "data": data,
            "fn_index": dependency["id"],
            "trigger_id": dependency["targets"][0][0],
            "session_hash": session,
            "event_data": None,
        },
    )
    if joined.status_code != 200:
        return joined.status_code, joined.text
    async with client.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:") and (message := json.loads(line.removeprefix("data:")))["msg"] == (
                "process_completed"
            ):
                return 200, ui_error(message)
    raise AssertionError("the event stream ended without a result")


def ui_error(message: dict[str, Any]) -> str | None:
    """The error text the page would show for a final message, or None if it succeeded."""
    return None if message.get("success") else (message.get("output") or {}).get("error")


@functools.cache
def button_dependency(url: str, elem_id: str) -> dict[str, Any]:
    """The event a page button (by its elem_id) fires on click (asked once per server and button)."""
    config = httpx.get(f"{url}/config", timeout=30).json()
    (button,) = [c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id]
    return next(d for d in config["dependencies"] if [button, "click"] in d["targets"])


def ui_upload(url: str, name: str, data: bytes) -> httpx.Response:
    """Send one file to Gradio's upload route as the page's client does (the form field `files`)."""
    return httpx.post(f"{url}/gradio_api/upload", files={"files": (name, data)}, timeout=30)


def ui_click(url: str, elem_id: str, data: list[Any]) -> dict[str, Any]:
    """Press the button `elem_id` with the event's `data` and return Gradio's final message."""
    dependency = button_dependency(url, elem_id)
    session = uuid.uuid4().hex
    payload = {
        "data": data,
        "fn_index": dependency["id"],
        "trigger_id": dependency["targets"][0][0],
        "session_hash": session,
        "event_data": None,
    }
    httpx.post(f"{url}/gradio_api/queue/join", json=payload, timeout=30).raise_for_status()
    with httpx.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=60) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and (message := json.loads(line.removeprefix("data:")))["msg"] == (
                "process_completed"
            ):
                return message
    raise AssertionError("the event stream ended without a result")
