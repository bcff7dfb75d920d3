"""ASGI middleware that lets a request through only once it is known who sends it.

Order of checks: the probes (the kubelet and the ALB health check carry no token) and the /auth/*
routes are open; otherwise an `Authorization: Bearer <access token>` header, else the browser's
session cookie, must verify (common/auth/tokens.py). A page load without a valid session is sent to
the sign-in; anything else gets a 401 JSON message. Nothing unauthenticated reaches the routes, so
nothing unauthenticated reaches the batching queue.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.middleware import send_json_error
from common.auth.browser import BrowserSignIn, credentials
from common.auth.env import LOGIN_PATH
from common.auth.tokens import KeysUnavailable, TokenError, TokenVerifier
from common.probe_paths import HEALTH_PATH, READINESS_PATH

log = logging.getLogger(__name__)
# Where the verified caller goes: request.state.caller_id (app/api/dependencies.get_caller_id reads it).
CALLER_STATE_KEY = "caller_id"
OPEN_PATHS = frozenset({HEALTH_PATH, READINESS_PATH})
# A job's image link (app/jobs/routes.py, GET /v1/jobs/{job_id}/image): its signature is the credential,
# so it works without a token, like an S3 presigned URL (the README promises so).
SIGNED_IMAGE_LINK = re.compile(r"/v1/jobs/[^/]+/image")


def _is_page_load(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    """A browser navigating (not a program): GET asking for HTML."""
    return scope.get("method") == "GET" and b"text/html" in headers.get(b"accept", b"")


class AuthMiddleware:
    """Verify the caller before the app sees the request."""

    def __init__(self, app: ASGIApp, *, verifier: TokenVerifier, browser: BrowserSignIn) -> None:
        self.app = app
        self.verifier = verifier
        self.browser = browser

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS or _is_signed_link(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"].startswith("/auth/"):
            response = await self.browser.handle(Request(scope, receive))
            await response(scope, receive, send)
            return
        headers = dict(scope["headers"])
        token, from_cookie = credentials(scope, headers)
        problem: str
        if token is None:
            problem = "sign in first: send 'Authorization: Bearer <access token>' (see docs/serving.md)"
        else:
            try:
                identity = await self.verifier.verify(token)
            except TokenError as exc:
                problem = str(exc)
            except KeysUnavailable as exc:
                log.error("sign-in keys unavailable", extra={"event": "auth_keys_unavailable", "reason": str(exc)})
                await _reply(scope, send, 503, "sign-in is unavailable right now; try again shortly")
                return
            else:
                scope.setdefault("state", {})[CALLER_STATE_KEY] = identity.subject
                await self.app(scope, receive, send)
                return
        if scope["type"] == "http" and (token is None or from_cookie) and _is_page_load(scope, headers):
            target = scope["path"] + (("?" + scope["query_string"].decode("latin-1")) if scope["query_string"] else "")
            await _redirect(send, f"{LOGIN_PATH}?next={quote(target, safe='')}")
            return
        await _reply(scope, send, 401, problem)


def _is_signed_link(scope: Scope) -> bool:
    """A GET of a job's image link: the route checks its signature."""
    is_get = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
    return is_get and SIGNED_IMAGE_LINK.fullmatch(scope["path"]) is not None


async def _reply(scope: Scope, send: Send, status: int, message: str) -> None:
    if scope["type"] == "websocket":
        # Policy violation: close the handshake without accepting it.
        await send({"type": "websocket.close", "code": 1008})
        return
    challenge = [(b"www-authenticate", b'Bearer realm="sd", error="invalid_token"')] if status == 401 else []
    await send_json_error(send, status, message, extra_headers=challenge, close=False, path=scope["path"])


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
