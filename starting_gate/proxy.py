"""Forward one request to the pool's Service and stream its answer back, keeping nothing of one client for another.

httpx's transport (httpcore's connection pool) carries the exchange, not an `httpx.AsyncClient`: a client keeps a
cookie jar, and would add the cookies one user's answer set (the sign-in's session) to every later request that
has none, so a stranger would be served as the last user who signed in. The transport has no jar, no auth and
follows no redirect: each request carries only its own client's header fields, and each answer's fields go back
as they came (a field sent twice, such as the sign-in's two `Set-Cookie`, stays two fields).

The pool of upstream connections is as large as the gate's own connection limit (MAX_CONNECTIONS), so every
connection the gate serves can have one; a request that still finds none within UPSTREAM_POOL_TIMEOUT_S gets a
503. Hop-by-hop header fields (RFC 9110 section 7.6.1) belong to one connection and are never forwarded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from common.http.asgi import Receive, Scope
from common.http.disconnect import ClientDisconnected
from starting_gate.settings import GateSettings

log = logging.getLogger(__name__)

# RFC 9110 section 7.6.1, plus `expect`: the gate's own server answers a client's 100-continue itself. Host is
# forwarded: the UI builds its links on the request's host when no PUBLIC_URL is set (tests/app/test_public_url.py).
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade", b"expect"}
)
UPSTREAM_IDLE_S = 60.0
"""An idle upstream connection is let go after this long, well within the pool's own keep-alive (the load
balancer's idle timeout and more), so the gate never sends on a connection the pool is closing."""


class PoolCold(Exception):
    """No pod took the connection: the pool's Service has no ready endpoint (nothing of the request was sent)."""


@dataclass(frozen=True)
class UpstreamFailed(Exception):
    """The pool failed the exchange before its answer began; `status` and `message` are the client's answer."""

    status: int
    message: str


def upstream_transport(settings: GateSettings) -> httpx.AsyncHTTPTransport:
    """The connection pool to the pool's Service: no retries (a refused connection means "cold", at once)."""
    limits = httpx.Limits(
        max_connections=settings.max_connections,
        max_keepalive_connections=settings.max_connections,
        keepalive_expiry=UPSTREAM_IDLE_S,
    )
    return httpx.AsyncHTTPTransport(limits=limits, retries=0)


def forwarded_fields(fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`fields` without the hop-by-hop ones (and those the Connection field names), order and repeats kept."""
    named = {
        token.strip().lower() for name, value in fields if name.lower() == b"connection" for token in value.split(b",")
    }
    return [(name, value) for name, value in fields if name.lower() not in HOP_BY_HOP and name.lower() not in named]


def has_body(fields: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request's head announces a body (a non-zero Content-Length, or any Transfer-Encoding)."""
    for name, value in fields:
        lowered = name.lower()
        if lowered == b"transfer-encoding" or (lowered == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


class Exchange:
    """One request forwarded: `open()` sends it and returns the answer's head; `body()` streams the answer; `close()`
    lets go of the upstream connection (always, whatever happened)."""

    def __init__(self, transport: httpx.AsyncHTTPTransport, settings: GateSettings, scope: Scope, receive: Receive):
        self._transport = transport
        self._settings = settings
        self._scope = scope
        self._receive = receive
        self._response: httpx.Response | None = None
        self.body_sent = asyncio.Event()  # set once the client's body has been read whole (or there was none)

    async def open(self) -> tuple[int, list[tuple[bytes, bytes]]]:
        """Send the request; the answer's status and forwardable header fields. PoolCold when no pod takes the
        connection, UpstreamFailed when the pool fails before answering, ClientDisconnected when the client leaves
        while sending its body."""
        scope, settings = self._scope, self._settings
        fields = list(scope["headers"])
        query = scope.get("query_string", b"")
        url = httpx.URL(settings.upstream_url + scope["path"], query=query)
        content = self._request_body() if has_body(fields) else b""
        if content == b"":
            self.body_sent.set()
        timeout = httpx.Timeout(
            settings.upstream_timeout_s,
            connect=settings.upstream_connect_timeout_s,
            write=settings.body_timeout_s,
            pool=settings.upstream_pool_timeout_s,
        )
        request = httpx.Request(
            scope["method"],
            url,
            headers=forwarded_fields(fields),
            content=content,
            extensions={"timeout": timeout.as_dict()},
        )
        try:
            self._response = await self._transport.handle_async_request(request)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise PoolCold from exc
        except httpx.PoolTimeout as exc:
            raise UpstreamFailed(503, "the gate has no free connection to the pool right now; retry") from exc
        except httpx.TimeoutException as exc:
            log.warning("the pool did not answer in time", extra={"event": "upstream_timeout", "path": scope["path"]})
            raise UpstreamFailed(504, f"the pool did not answer within {settings.upstream_timeout_s:g} s") from exc
        except httpx.TransportError as exc:
            log.warning(
                "the pool closed the connection before answering",
                extra={"event": "upstream_failed", "path": scope["path"], "reason": repr(exc)},
            )
            raise UpstreamFailed(502, "the pool closed the connection before answering; retry") from exc
        response = self._response
        return response.status_code, forwarded_fields(list(response.headers.raw))

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body as it arrives (raw: any content coding stays as the pool sent it). Raises
        httpx.TransportError when the pool breaks off or falls silent for UPSTREAM_TIMEOUT_S."""
        assert self._response is not None, "open() first"
        async for piece in self._response.aiter_raw():
            if piece:
                yield piece

    async def close(self) -> None:
        """Let go of the upstream connection: back to the pool after a whole answer, else closed."""
        if self._response is not None:
            await self._response.aclose()

    async def _request_body(self) -> AsyncIterator[bytes]:
        """The client's body, piece by piece as it arrives (the gate's server bounds its time; the pool its size)."""
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnected
            piece = message.get("body", b"")
            if piece:
                yield piece
            if not message.get("more_body", False):
                self.body_sent.set()
                return
