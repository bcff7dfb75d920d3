"""The gateway's HTTP client to vLLM: httpx (pinned in llm_gateway/requirements.txt), over the pod's Unix socket or
loopback TCP, with the gateway's bounds on it.

- One pool of at most `GatewaySettings.engine_connections` connections (the open-file budget counts exactly
  these), all of them kept alive while idle, each let go UPSTREAM_IDLE_MARGIN_S before the engine's own keep-alive
  (UPSTREAM_KEEP_ALIVE_S) would close it, so a request is never sent on a connection the engine is closing.
- Timeouts: the connect's (UPSTREAM_CONNECT_TIMEOUT_S, and as long for a free connection of the pool), the
  request's write (UPSTREAM_WRITE_TIMEOUT_S); no read timeout: a queued or long generation is not a failure.
- Bodies pass as they come (`aiter_raw`, `accept-encoding: identity`): httpx reads the socket only when the gateway
  asks for the next piece (httpcore over anyio pauses reading between reads), so a client that reads slowly slows
  the engine's socket, not the gateway's memory. Whole answers are read within a byte bound (`read_within`).
- Closing a response before its end closes its connection: vLLM aborts a request whose connection closes.
- Nothing of one request is kept for another: no cookie jar, no environment proxies or .netrc.
"""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from llm_gateway.engine_address import socket_path
from llm_gateway.settings import GatewaySettings

UPSTREAM_IDLE_MARGIN_S = 1.0
"""An idle connection to the engine is let go this long before the engine's keep-alive (UPSTREAM_KEEP_ALIVE_S) ends."""
UPSTREAM_WRITE_TIMEOUT_S = 30.0
"""How long the engine may take to read a request's bytes."""
SOCKET_BASE_URL = "http://localhost"
"""The URL requests name when they go over a Unix socket (the socket is the transport's; `localhost` the Host)."""
CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout)
"""No connection was made: nothing of the request was sent, so trying once more is safe."""
NOT_SENT = (*CONNECT_FAILURES, httpx.PoolTimeout)
"""Nothing of the request reached the engine (no connection, or none free in time): a retry later may succeed."""


class AnswerTooLarge(Exception):
    """The engine's answer (a whole body, or one event of a stream) is larger than its bound: it is read no further,
    and its connection is closed."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"the engine's {what} is larger than {limit} bytes")


def engine_client(settings: GatewaySettings) -> httpx.AsyncClient:
    """The client to the engine at UPSTREAM_URL (`http://host:port`, or `unix:/path` for vLLM's `--uds`)."""
    path = socket_path(settings.upstream_url)
    connections = settings.engine_connections
    limits = httpx.Limits(
        max_connections=connections,
        max_keepalive_connections=connections,
        keepalive_expiry=settings.upstream_keep_alive_s - UPSTREAM_IDLE_MARGIN_S,
    )
    # retries=0: the gateway tries a failed connect once more itself (gateway.py `_open_upstream`), and logs it.
    transport = httpx.AsyncHTTPTransport(uds=path, limits=limits, retries=0, trust_env=False)
    connect_s = settings.upstream_connect_timeout_s
    return httpx.AsyncClient(
        transport=transport,
        base_url=SOCKET_BASE_URL if path is not None else settings.upstream_url,
        headers={"accept-encoding": "identity"},  # bytes are forwarded as they come: never compressed
        timeout=httpx.Timeout(connect=connect_s, read=None, write=UPSTREAM_WRITE_TIMEOUT_S, pool=connect_s),
        cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),  # a jar that accepts no cookie
        trust_env=False,
    )


async def read_within(response: httpx.Response, max_bytes: int) -> bytes:
    """The rest of `response`'s body; AnswerTooLarge once it is longer than `max_bytes` (a content-length over it is
    refused before any of the body is read)."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise AnswerTooLarge("answer", max_bytes)
    parts: list[bytes] = []
    size = 0
    async for piece in response.aiter_raw():
        size += len(piece)
        if size > max_bytes:
            raise AnswerTooLarge("answer", max_bytes)
        parts.append(piece)
    return b"".join(parts)


async def get_within(client: httpx.AsyncClient, path: str, max_bytes: int) -> tuple[int, httpx.Headers, bytes]:
    """GET `path` from the engine: its status, headers and body (read within `max_bytes`). Callers bound the time
    with `asyncio.timeout`; a response left unfinished closes its connection."""
    async with client.stream("GET", path) as response:
        return response.status_code, response.headers, await read_within(response, max_bytes)
