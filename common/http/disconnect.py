"""Cancel a request's work when its client leaves (or when the server's drain cuts it).

Neither Starlette nor uvicorn cancels a handler when the client disconnects, so a handler that awaits
the batcher or the engine would keep a queue slot and run the model for nobody. Once the body has been
read, uvicorn's ASGI `receive` blocks until the connection closes and then returns `http.disconnect`
(uvicorn 0.54 `protocols/http/{h11,httptools}_impl.py`, `RequestResponseCycle.receive`), which is
the signal watched here.
"""

from __future__ import annotations

import asyncio
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


async def unless_disconnected(receive: Receive, work: Awaitable[T], *, cut: asyncio.Future[None] | None = None) -> T:
    """Await `work`; if the client disconnects first, cancel it and raise ClientDisconnected; if `cut` is done
    first, cancel it and raise WorkCut. The work's own result or error wins a tie. Cancelling waits for the
    work to unwind, so whatever it holds (an upstream connection, a queue slot) is let go on return.

    The work runs in the caller's task and one watcher task waits for the disconnect (the cut is a future's
    callback): a task per request, not three and an `asyncio.wait`, on the path every request takes."""
    task = asyncio.current_task()
    assert task is not None, "unless_disconnected runs in a task"
    stopped: list[type[Exception]] = []
    finished = False

    def stop(error: type[Exception]) -> None:
        if not finished and not stopped:
            stopped.append(error)
            task.cancel()

    def on_disconnect(watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled() and watcher.exception() is None:
            stop(ClientDisconnected)

    def on_cut(_: asyncio.Future[None]) -> None:
        stop(WorkCut)

    watcher = asyncio.ensure_future(wait_for_disconnect(receive))
    watcher.add_done_callback(on_disconnect)
    if cut is not None:
        cut.add_done_callback(on_cut)
    try:
        return await work
    except asyncio.CancelledError:
        if stopped:
            (stopped_by_us,) = stopped
            stopped.clear()  # uncancelled here, not again below
            if task.uncancel() == 0:
                raise stopped_by_us() from None
        raise
    finally:
        finished = True
        if stopped:  # the work swallowed the cancellation this call asked for: take the request back
            task.uncancel()
        watcher.remove_done_callback(on_disconnect)
        watcher.cancel()
        if cut is not None:
            cut.remove_done_callback(on_cut)
