"""Cancel a request's work when its client leaves (or when the server's drain cuts it).

Neither Starlette nor uvicorn cancels a handler when the client disconnects, so a handler that awaits
the batcher or the engine would keep a queue slot and run the model for nobody. Once the body has been
read, uvicorn's ASGI `receive` blocks until the connection closes and then returns `http.disconnect`
(uvicorn 0.54 `protocols/http/{h11,httptools}_impl.py`, `RequestResponseCycle.receive`), which is
the signal watched here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from common.http.asgi import Receive

T = TypeVar("T")

CLIENT_CLOSED_REQUEST = 499
"""The status logged and counted for a request whose client left before its answer (nginx's 499)."""


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready; its work was cancelled."""


class WorkCut(Exception):
    """The server cut the work (its drain ran out of time) before it was done; the work was cancelled."""


async def wait_for_disconnect(receive: Receive) -> None:
    """Return when the ASGI channel reports `http.disconnect` (call only after the body was read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(receive: Receive, work: Awaitable[T], *, cut: asyncio.Event | None = None) -> T:
    """Await `work`; if the client disconnects first, cancel it and raise ClientDisconnected; if `cut` is set
    first, cancel it and raise WorkCut. The work's own result or error wins a tie. Cancelling waits for the
    work to unwind, so whatever it holds (an upstream connection, a queue slot) is let go on return."""
    task = asyncio.ensure_future(work)
    watchers = {asyncio.ensure_future(wait_for_disconnect(receive)): ClientDisconnected}
    if cut is not None:
        watchers[asyncio.ensure_future(cut.wait())] = WorkCut
    try:
        done, _ = await asyncio.wait({task, *watchers}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for watcher in watchers:
            watcher.cancel()
        if not task.done():  # a watcher won, or this call itself was cancelled
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task in done:
        return task.result()
    raise next(error for watcher, error in watchers.items() if watcher in done)
