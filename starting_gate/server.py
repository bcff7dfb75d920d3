"""The gate's ASGI app: every request goes to the pool while a pod takes it, else gets the starting answer.

Routes, in order:
- `/health` (GET, HEAD): the gate's own liveness, the ALB's health check; it stays healthy while the pool is at zero.
- `/auth/*` with sign-in on: the browser sign-in, served by the gate itself, so that a person can sign in while no
  pod exists (the pool's own sign-in routes would answer nothing then).
- anything else: forwarded (`proxy.Exchange`). When no pod takes the connection, the caller's sign-in is checked
  as the pool would check it: a caller who is not signed in gets the sign-in answer (a redirect for a page load,
  else a 401); a signed-in request for images counts as demand; both then get "starting, about N minutes".

On SIGTERM (common/http/server.py's DrainingServer) the gate refuses new requests, lets those in flight (the UI's
event streams included) finish within the grace period, cuts the rest, and then publishes what it counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from starlette.requests import Request

from common.auth.browser import BrowserSignIn, credentials
from common.auth.env import LOGIN_PATH
from common.auth.tokens import KeysUnavailable, TokenError
from common.http.asgi import Receive, Scope, Send
from common.http.disconnect import ClientDisconnected, WorkCut, unless_disconnected
from common.image_api_errors import error_payload
from common.probe_paths import HEALTH_PATH
from starting_gate.answer import starting_response, wants_html
from starting_gate.demand import DemandCounter, asks_for_images
from starting_gate.proxy import Exchange, PoolCold, UpstreamFailed, upstream_transport
from starting_gate.settings import GateSettings

log = logging.getLogger(__name__)

# The gate answers the ALB's health check itself (the image service's liveness path): the gate is the target, and
# it must stay healthy while no serving pod exists.
GATE_HEALTH_PATH = HEALTH_PATH
AUTH_PREFIX = "/auth/"


class Gate:
    """The gate for `settings`. `counter` counts the signed-in requests for images that found no ready pod;
    `on_shutdown` runs once the server has stopped serving (the last flush of that count)."""

    def __init__(
        self,
        settings: GateSettings,
        counter: DemandCounter | None = None,
        on_shutdown: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.demand = counter if counter is not None else DemandCounter()
        self._on_shutdown = on_shutdown
        self._transport = upstream_transport(settings)
        self._sign_in_http = httpx.AsyncClient(timeout=10.0)  # the user pool's keys and token endpoint only
        self._sign_in = BrowserSignIn.from_settings(settings, self._sign_in_http) if settings.auth != "off" else None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._cut: asyncio.Future[None] | None = None
        self._draining = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # No WebSocket scope reaches it: the shared server refuses upgrades (common/http/protocol.py).
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        else:
            await self._http(scope, receive, send)

    async def drain(self, timeout_s: float) -> None:
        """Refuse new requests; give those in flight `timeout_s` to finish, then cut them."""
        self._draining = True
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=timeout_s)
        if self._cut is not None and not self._cut.done():
            self._cut.set_result(None)
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=1.0)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._cut = asyncio.get_running_loop().create_future()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._transport.aclose()
                await self._sign_in_http.aclose()
                if self._on_shutdown is not None:
                    self._on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == GATE_HEALTH_PATH:
            await self._health(scope, send)
        elif self._draining:
            await self._error(scope, send, 503, "the gate is stopping; retry", retry_after_s=1)
        elif self._sign_in is not None and path.startswith(AUTH_PREFIX):
            response = await self._sign_in.handle(Request(scope, receive))
            await response(scope, receive, send)
        else:
            task = asyncio.current_task()
            assert task is not None
            self._in_flight.add(task)
            try:
                await self._forward(scope, receive, send)
            finally:
                self._in_flight.discard(task)

    async def _health(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await self._error(scope, send, 405, "use GET", extra=[(b"allow", b"GET, HEAD")])
            return
        status = "stopping" if self._draining else "ok"
        body = f'{{"status":"{status}","waiting_requests_seen":{self.demand.total}}}'.encode()
        await _send(send, 200, [(b"content-type", b"application/json")], body)

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = Exchange(self._transport, self.settings, scope, receive)
        started = False

        async def after_body() -> dict[str, Any]:
            # The disconnect watch may read the channel only once the body has gone upstream.
            await exchange.body_sent.wait()
            return dict(await receive())

        async def relay() -> None:
            nonlocal started
            status, fields = await exchange.open()
            await send({"type": "http.response.start", "status": status, "headers": fields})
            started = True
            async for piece in exchange.body():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

        try:
            await unless_disconnected(after_body, relay(), cut=self._cut)
        except PoolCold:
            await self._cold(scope, send)
        except UpstreamFailed as failure:
            await self._error(scope, send, failure.status, failure.message, retry_after_s=1)
        except WorkCut:
            if not started:
                await self._error(scope, send, 503, "the gate is stopping; retry", retry_after_s=1)
        except httpx.TransportError as exc:
            # The answer had begun: its client sees the connection end before the body does.
            log.warning(
                "the pool broke off its answer",
                extra={"event": "upstream_broke_off", "path": scope["path"], "reason": repr(exc)},
            )
        except ClientDisconnected:
            pass
        finally:
            await exchange.close()

    async def _cold(self, scope: Scope, send: Send) -> None:
        """No pod took the request: the sign-in answer for a caller who is not signed in; otherwise count a request
        for images as demand, and answer "starting"."""
        headers = dict(scope["headers"])
        request = Request(scope)
        if self._sign_in is not None:
            token, from_cookie = credentials(scope, headers)
            problem = "sign in first: send 'Authorization: Bearer <access token>' (see docs/serving.md)"
            if token is not None:
                try:
                    await self._sign_in.verifier.verify(token)
                    problem = ""
                except TokenError as exc:
                    problem = str(exc)
                except KeysUnavailable as exc:
                    log.error("sign-in keys unavailable", extra={"event": "auth_keys_unavailable", "reason": str(exc)})
                    await self._error(scope, send, 503, "sign-in is unavailable right now; try again shortly")
                    return
            if problem:
                if (token is None or from_cookie) and wants_html(request):
                    query = scope["query_string"].decode("latin-1")
                    target = scope["path"] + (f"?{query}" if query else "")
                    location = f"{LOGIN_PATH}?next={quote(target, safe='')}".encode("latin-1")
                    await _send(send, 302, [(b"location", location)], b"")
                else:
                    challenge = [(b"www-authenticate", b'Bearer realm="sd", error="invalid_token"')]
                    await self._error(scope, send, 401, problem, extra=challenge)
                return
        if asks_for_images(scope["method"], scope["path"], wants_html(request)):
            self.demand.add()
        response = starting_response(request, self.settings.starting_minutes, self.settings.retry_after_seconds)
        await response(scope, _no_body, send)

    async def _error(
        self,
        scope: Scope,
        send: Send,
        status: int,
        message: str,
        *,
        retry_after_s: int | None = None,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """A JSON error in the image API's shape for the path (OpenAI's on the OpenAI-compatible routes)."""
        fields = [(b"content-type", b"application/json"), *(extra or [])]
        if retry_after_s is not None:
            fields.append((b"retry-after", str(retry_after_s).encode()))
        await _send(send, status, fields, error_payload(scope["path"], status, message))


async def _send(send: Send, status: int, fields: list[tuple[bytes, bytes]], body: bytes) -> None:
    fields = [*fields, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def create_app(
    settings: GateSettings, counter: DemandCounter | None = None, on_shutdown: Callable[[], None] | None = None
) -> Gate:
    """The gate's ASGI app (see `Gate`)."""
    return Gate(settings, counter, on_shutdown)
