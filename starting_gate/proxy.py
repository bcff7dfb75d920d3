"""Forward one request to the upstream Service, streaming the answer (the UI's event streams included)."""

from __future__ import annotations

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

# Hop-by-hop headers (RFC 9110, section 7.6.1) are the connection's own, never forwarded. Host is forwarded: the UI
# builds its links on the request's host when no PUBLIC_URL is set (tests/app/test_public_url.py).
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)


def _forwardable(headers: httpx.Headers | dict[str, str]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP_BY_HOP]


async def forward(client: httpx.AsyncClient, upstream: str, request: Request) -> StreamingResponse | None:
    """The upstream's answer, or None when no pod takes the connection (the Service has no ready endpoint)."""
    url = httpx.URL(upstream + request.url.path, query=request.url.query.encode())
    # The body streams through, never buffered here: the pool's service bounds it (413) as it does without the gate.
    outgoing = client.build_request(
        request.method, url, headers=_forwardable(dict(request.headers)), content=request.stream()
    )
    try:
        answer = await client.send(outgoing, stream=True)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        return None
    return StreamingResponse(
        answer.aiter_raw(),
        status_code=answer.status_code,
        headers=dict(_forwardable(answer.headers)),
        background=BackgroundTask(answer.aclose),
    )
