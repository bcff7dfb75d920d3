"""The gateway's HTTP client to vLLM: aiohttp (pinned in llm_gateway/requirements.txt), over the pod's Unix socket or
loopback TCP, with the gateway's bounds on it.

aiohttp, not httpx: a streamed token costs the gateway one read, and `python -m tools.gateway_overhead`'s stand-in
measured httpx's `aiter_raw` at about 41 us of CPU per piece (h11 in Python, four async generator layers, anyio's
pause and resume of the socket around every read) against aiohttp's `iter_any` at about 7 us (llhttp in C, one
buffer per connection); with httpx the gateway fell short of the overhead targets at 64 streams (docs/benchmarks.md).

- One pool of at most `GatewaySettings.engine_connections` connections (the open-file budget counts exactly
  these), kept alive while idle and let go UPSTREAM_IDLE_MARGIN_S before the engine's own keep-alive
  (UPSTREAM_KEEP_ALIVE_S) would close them, so a request is never sent on a connection the engine is closing.
- Timeouts: UPSTREAM_CONNECT_TIMEOUT_S for a connection (a free one of the pool, or a new one); no read timeout (a
  queued or long generation is not a failure: callers bound what they need with `asyncio.timeout`).
- Bodies pass as they come (`accept-encoding: identity`, no decompression). aiohttp stops reading a connection's
  socket while more than 2 x READ_BUFFER_BYTES of its body wait unread, so a client that reads slowly slows the
  engine's socket, not the gateway's memory. Whole answers are read within a byte bound (`read_within`).
- Closing a response before its end closes its connection: vLLM aborts a request whose connection closes.
- Nothing of one request is kept for another: no cookie jar, no environment proxies or .netrc.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from llm_gateway.engine_address import socket_path
from llm_gateway.settings import GatewaySettings

UPSTREAM_IDLE_MARGIN_S = 1.0
"""An idle connection to the engine is let go this long before the engine's keep-alive (UPSTREAM_KEEP_ALIVE_S) ends."""
READ_BUFFER_BYTES = 64 * 1024
"""aiohttp's read buffer per response (its `read_bufsize`, whose default this is): reading pauses past twice this."""
SOCKET_BASE_URL = "http://localhost"
"""What requests over a Unix socket name as their URL (the socket is the connector's; `localhost` the Host)."""
CONNECT_FAILURES = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""No connection was made (refused, no socket file, none within the timeout, none free in the pool): nothing of the
request was sent, so trying it once more, or later, is safe."""
EngineError = aiohttp.ClientError
"""Any failure of the engine's connection or answer (aiohttp's; its timeouts are TimeoutErrors too)."""


class AnswerTooLarge(Exception):
    """The engine's answer (a whole body, or one event of a stream) is larger than its bound: it is read no further,
    and its connection is closed."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"the engine's {what} is larger than {limit} bytes")


class EngineClient:
    """The session to the engine at UPSTREAM_URL (`http://host:port`, or `unix:/path` for vLLM's `--uds`), made on
    first use: aiohttp makes its pool in a running event loop, and the gateway is built before uvicorn starts one."""

    def __init__(self, settings: GatewaySettings) -> None:
        self._socket_path = socket_path(settings.upstream_url)
        self._base = SOCKET_BASE_URL if self._socket_path is not None else settings.upstream_url.rstrip("/")
        self._connections = settings.engine_connections
        self._keep_alive_s = settings.upstream_keep_alive_s - UPSTREAM_IDLE_MARGIN_S
        self._connect_s = settings.upstream_connect_timeout_s
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The session (its pool of connections), made in the running loop on first use."""
        if self._session is None:
            limit, keep_alive_s = self._connections, self._keep_alive_s
            connector = (
                aiohttp.TCPConnector(limit=limit, keepalive_timeout=keep_alive_s)
                if self._socket_path is None
                else aiohttp.UnixConnector(self._socket_path, limit=limit, keepalive_timeout=keep_alive_s)
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, connect=self._connect_s),
                headers={"accept-encoding": "identity"},  # bytes are forwarded as they come: never compressed
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                read_bufsize=READ_BUFFER_BYTES,
            )
        return self._session

    def url(self, path: str) -> str:
        """The engine's URL of `path`."""
        return self._base + path

    async def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> aiohttp.ClientResponse:
        """Send a request; its response once the head is in (the body still to read; `close()` it when done)."""
        return await self.session.request(method, self.url(path), data=body, headers=headers, allow_redirects=False)

    async def aclose(self) -> None:
        """Close the pool's connections."""
        if self._session is not None:
            await self._session.close()


async def read_within(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The rest of `response`'s body; AnswerTooLarge once it is longer than `max_bytes` (a content-length over it is
    refused before any of the body is read)."""
    if response.content_length is not None and response.content_length > max_bytes:
        raise AnswerTooLarge("answer", max_bytes)
    parts: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        size += len(piece)
        if size > max_bytes:
            raise AnswerTooLarge("answer", max_bytes)
        parts.append(piece)
    return b"".join(parts)


async def get_within(client: EngineClient, path: str, max_bytes: int) -> tuple[int, Mapping[str, str], bytes]:
    """GET `path` from the engine: its status, headers and body (read within `max_bytes`). Callers bound the time
    with `asyncio.timeout`; a response left unfinished closes its connection."""
    return await _whole_answer(client, "GET", path, max_bytes)


async def post_within(
    client: EngineClient, path: str, body: bytes, max_bytes: int
) -> tuple[int, Mapping[str, str], bytes]:
    """POST the JSON `body` to `path` and read the whole answer, as `get_within` does."""
    return await _whole_answer(client, "POST", path, max_bytes, body)


async def _whole_answer(
    client: EngineClient, method: str, path: str, max_bytes: int, body: bytes | None = None
) -> tuple[int, Mapping[str, str], bytes]:
    headers = None if body is None else {"content-type": "application/json"}
    response = await client.request(method, path, body, headers)
    try:
        return response.status, response.headers, await read_within(response, max_bytes)
    finally:
        response.close()
