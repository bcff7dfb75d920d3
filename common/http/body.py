"""The bounded body reader: a request's body read with a cap before anything parses it.

A refused body is read and dropped first (up to a bound and a time), so that a client that writes its
whole body before reading (Python's urllib, a load balancer) reads the 413 instead of a reset connection;
a client that sent `Expect: 100-continue` waits for an invitation before it sends the body, and is refused
without one. The image service reads every route's body through it (app/api/middleware.py), the gateway
its generations' bodies.

A chunked body's trailer section never reaches it (uvicorn passes no trailers to the app): the server bounds it
(common/http/protocol.py: MAX_HEADER_BYTES, MAX_HEADER_COUNT, within BODY_TIMEOUT_S) while `receive` waits for
the body's end, here as anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from common.http.asgi import Receive
from common.http.disconnect import ClientDisconnected


@dataclass(frozen=True)
class BodyLimits:
    """How much body a request may have, and how much of a refused one is read and dropped, for how long."""

    max_bytes: int
    max_discard_bytes: int
    discard_timeout_s: float


class BodyTooLarge(Exception):
    """The request body is larger than the limit; what the client sent of it was read and dropped (bounded)."""


def waits_for_continue(headers: dict[bytes, bytes]) -> bool:
    """True when the client sent `Expect: 100-continue`: it sends its body only once invited, and the first
    `receive()` is that invitation (uvicorn sends the 100 Continue), so a refusal must come before it."""
    return headers.get(b"expect", b"").lower() == b"100-continue"


async def read_body(receive: Receive, headers: dict[bytes, bytes], limits: BodyLimits) -> bytes:
    """The whole (possibly chunked) request body. BodyTooLarge past `limits.max_bytes` (declared or sent),
    ClientDisconnected if the client leaves before it is in."""
    declared = headers.get(b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limits.max_bytes):
        if not waits_for_continue(headers):
            await _discard(receive, 0, limits)
        raise BodyTooLarge
    body = bytearray()
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > limits.max_bytes:
            if more:
                await _discard(receive, len(body), limits)
            raise BodyTooLarge
    return bytes(body)


async def discard_body(receive: Receive, headers: dict[bytes, bytes], limits: BodyLimits) -> None:
    """Read and drop a request's body that is refused whatever its size (bounded), unless the client waits
    for an invitation to send it."""
    if not waits_for_continue(headers):
        await _discard(receive, 0, limits)


async def _discard(receive: Receive, already: int, limits: BodyLimits) -> None:
    """Read and drop the rest of a body (`already` bytes read), up to `max_discard_bytes` and `discard_timeout_s`:
    the bounds keep a huge or slow body from costing more."""

    async def drain() -> None:
        seen = already
        while seen <= limits.max_discard_bytes:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(drain(), limits.discard_timeout_s)
