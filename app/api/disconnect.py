"""Cancel a request's work when its client leaves.

Neither Starlette nor uvicorn cancels a handler when the client disconnects, so a handler that awaits
the batcher would keep a queue slot and run the pipeline for nobody. Once the body has been read,
uvicorn's ASGI `receive` blocks until the connection closes and then returns `http.disconnect`
(uvicorn 0.54 `protocols/http/{h11,httptools}_impl.py`, `RequestResponseCycle.receive`), which is
the signal watched here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")

CLIENT_CLOSED_REQUEST = 499
"""The status logged and counted for a request whose client left before its answer (nginx's 499)."""


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready; its work was cancelled."""


async def wait_for_disconnect(receive: Receive) -> None:
    """Return when the ASGI channel reports `http.disconnect` (call only after the body was read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(receive: Receive, work: Awaitable[T]) -> T:
    """Await `work`; if the client disconnects first, cancel it and raise ClientDisconnected."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientDisconnected
    finally:
        watcher.cancel()
        task.cancel()
