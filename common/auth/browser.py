"""Browser sign-in: OAuth 2.0 authorization code with PKCE through Cognito's managed login.

    GET /auth/login?next=/        -> 302 to <login url>/oauth2/authorize (state + PKCE challenge)
    GET /auth/callback?code&state -> code exchanged at <login url>/oauth2/token, access token
                                     verified, kept in an HttpOnly cookie; 302 to `next`
    GET /auth/logout              -> cookie cleared; 302 to <login url>/logout

The UI's app client is public (no secret to keep): PKCE binds the code to this browser's flow.
Endpoints and parameters: Amazon Cognito Developer Guide, "Authorize endpoint", "Token endpoint",
"Logout endpoint". The session is the access token itself, so any pod can check it (no server-side
session store); when it expires the browser goes through the (single sign-on) login again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote, urlencode

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from common.auth.env import CALLBACK_PATH, LOGIN_PATH, LOGOUT_PATH
from common.auth.tokens import KeysUnavailable, TokenError, TokenVerifier
from common.logs import log_failure
from common.settings import BrowserSignInSettings

log = logging.getLogger(__name__)

SESSION_COOKIE: Final = "sd_session"
FLOW_COOKIE: Final = "sd_signin"
FLOW_MAX_AGE_S: Final = 600  # a sign-in must finish within 10 minutes
SCOPES: Final = "openid"


def safe_next(value: str | None) -> str:
    """Only same-site paths: `next` must never send the browser to another site after sign-in."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def credentials(scope: MutableMapping[str, Any], headers: Mapping[bytes, bytes]) -> tuple[str | None, bool]:
    """The access token a request presents, and whether it came from the session cookie: an
    `Authorization: Bearer` header wins over the cookie. (None, False) when it presents neither."""
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    cookie = Request(scope).cookies.get(SESSION_COOKIE) if b"cookie" in headers else None
    return (cookie, True) if cookie else (None, False)


def pkce_challenge(verifier: str) -> str:
    """S256 code challenge (RFC 7636): base64url(sha256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class BrowserSignIn:
    """The three /auth/* routes for one Cognito app client."""

    verifier: TokenVerifier
    client_id: str
    login_url: str  # the user pool domain, https://<prefix>.auth.<region>.amazoncognito.com
    public_url: str  # where browsers reach the service
    http: httpx.AsyncClient

    @classmethod
    def from_settings(cls, settings: BrowserSignInSettings, http: httpx.AsyncClient) -> BrowserSignIn:
        """The sign-in that `settings` (AUTH=cognito) describe, its token checks included, on `http`."""
        return cls(
            verifier=TokenVerifier(settings.auth_issuer, settings.auth_client_id_list, http=http),
            client_id=settings.auth_ui_client_id,
            login_url=settings.auth_login_url,
            public_url=settings.public_url,
            http=http,
        )

    @property
    def redirect_uri(self) -> str:
        """The callback URL registered on the app client."""
        return self.public_url.rstrip("/") + CALLBACK_PATH

    @property
    def _secure(self) -> bool:
        return self.public_url.startswith("https://")

    async def handle(self, request: Request) -> Response:
        """Serve one /auth/* request."""
        if request.method != "GET":
            return JSONResponse({"error": "use GET"}, status_code=405)
        if request.url.path == LOGIN_PATH:
            return self.login(safe_next(request.query_params.get("next")))
        if request.url.path == CALLBACK_PATH:
            return await self.callback(request)
        if request.url.path == LOGOUT_PATH:
            return self.logout()
        return JSONResponse({"error": "not found"}, status_code=404)

    def login(self, next_path: str) -> Response:
        """Start a sign-in: remember state and the PKCE verifier in a short-lived cookie."""
        state = secrets.token_urlsafe(24)
        code_verifier = secrets.token_urlsafe(48)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": self.redirect_uri,
                "scope": SCOPES,
                "state": state,
                "code_challenge": pkce_challenge(code_verifier),
                "code_challenge_method": "S256",
            }
        )
        response = RedirectResponse(f"{self.login_url.rstrip('/')}/oauth2/authorize?{query}", status_code=302)
        response.set_cookie(
            FLOW_COOKIE,
            f"{state}.{code_verifier}.{quote(next_path, safe='')}",
            max_age=FLOW_MAX_AGE_S,
            path="/auth/",
            secure=self._secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def callback(self, request: Request) -> Response:
        """Finish a sign-in: check state, redeem the code, verify the token, set the session cookie."""
        params = request.query_params
        if "error" in params:
            return _bad_request(f"sign-in failed: {params.get('error_description') or params['error']}")
        flow = (request.cookies.get(FLOW_COOKIE) or "").split(".", 2)
        if len(flow) != 3 or not secrets.compare_digest(flow[0], params.get("state", "")):
            return _bad_request(f"this sign-in expired or was started elsewhere: open {LOGIN_PATH} again")
        code = params.get("code")
        if not code:
            return _bad_request("the sign-in response has no code")
        _, code_verifier, next_quoted = flow
        try:
            reply = await self.http.post(
                f"{self.login_url.rstrip('/')}/oauth2/token",
                data={
                    "grant_type": "authorization_code",
                    "client_id": self.client_id,
                    "code": code,
                    "redirect_uri": self.redirect_uri,
                    "code_verifier": code_verifier,
                },
            )
        except httpx.HTTPError as exc:
            # The exception's text (host names, addresses) goes to the log, not to the browser.
            error_id = log_failure(log, "the sign-in token endpoint did not answer", exc)
            return _unavailable(f"the sign-in service did not answer (error id {error_id}): try again")
        if reply.status_code != 200:
            return _bad_request(f"the sign-in code was refused ({reply.status_code}): open {LOGIN_PATH} again")
        tokens = _token_reply(reply)
        if tokens is None:
            log.error("unreadable reply from the sign-in token endpoint", extra={"event": "auth_bad_token_reply"})
            return _unavailable(f"the sign-in service sent an unreadable reply: open {LOGIN_PATH} again")
        access_token, expires_in = tokens
        try:
            await self.verifier.verify(access_token)
        except TokenError as exc:
            return _bad_request(f"the sign-in service returned an unusable token: {exc}")
        except KeysUnavailable as exc:
            log.error("sign-in keys unavailable", extra={"event": "auth_keys_unavailable", "reason": str(exc)})
            return JSONResponse({"error": "sign-in is unavailable right now; try again shortly"}, status_code=503)
        response = RedirectResponse(safe_next(unquote(next_quoted)), status_code=302)
        response.set_cookie(
            SESSION_COOKIE,
            access_token,
            max_age=expires_in,
            path="/",
            secure=self._secure,
            httponly=True,
            samesite="lax",
        )
        response.delete_cookie(FLOW_COOKIE, path="/auth/")
        return response

    def logout(self) -> Response:
        """Forget the session here and at Cognito, then come back to the start page."""
        query = urlencode({"client_id": self.client_id, "logout_uri": self.public_url.rstrip("/") + "/"})
        response = RedirectResponse(f"{self.login_url.rstrip('/')}/logout?{query}", status_code=302)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=self._secure, httponly=True, samesite="lax")
        return response


def _bad_request(message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=400)


def _unavailable(message: str) -> JSONResponse:
    """502: the sign-in service failed, not the browser."""
    return JSONResponse({"error": message}, status_code=502)


def _token_reply(reply: httpx.Response) -> tuple[str, int] | None:
    """(access token, lifetime in seconds) from the token endpoint's JSON, or None when it is not the
    object the Token endpoint documents (access_token a string, expires_in a positive integer)."""
    try:
        tokens = reply.json()
    except ValueError:
        return None
    if not isinstance(tokens, dict):
        return None
    access_token, expires_in = tokens.get("access_token"), tokens.get("expires_in", 3600)
    if not isinstance(access_token, str) or type(expires_in) is not int or expires_in <= 0:
        return None
    return access_token, expires_in
