"""A stand-in for a Cognito user pool on a loopback port: its own RSA key, the JWKS at
<issuer>/.well-known/jwks.json, /oauth2/authorize (signs the browser in at once) and /oauth2/token
(authorization-code grant with PKCE; client-credentials grant for the programs' client), so the service's
sign-in runs against real HTTP."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Form, Request
from fastapi.responses import JSONResponse, RedirectResponse

UI_CLIENT, API_CLIENT = "ui-client-1", "api-client-2"


def new_key() -> rsa.RSAPrivateKey:
    """A fresh 2048-bit RSA signing key."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class FakeUserPool:
    """The pool's signing key, JWKS and OAuth endpoints; `url` is set once it serves."""

    url: str = ""
    key: rsa.RSAPrivateKey = field(default_factory=new_key)
    kid: str = "key-1"
    challenges: dict[str, str] = field(default_factory=dict)  # code -> PKCE challenge it was issued for
    api_client_id: str = API_CLIENT  # the programs' client
    api_client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @contextmanager
    def serving(self) -> Iterator[FakeUserPool]:
        """Serve the pool on a loopback port (its `url` set) for the length of the block."""
        from app.bench.inprocess import serve_in_thread

        with serve_in_thread(self.app()) as url:
            self.url = url
            yield self

    def service_settings(self) -> dict[str, Any]:
        """The service's AUTH=cognito settings that trust this pool (UI and API clients)."""
        return {
            "auth": "cognito",
            "auth_issuer": self.issuer,
            "auth_client_ids": f"{UI_CLIENT},{API_CLIENT}",
            "auth_ui_client_id": UI_CLIENT,
            "auth_login_url": self.url,
        }

    @property
    def issuer(self) -> str:
        """The `iss` of its tokens."""
        return f"{self.url}/pool"

    def token(self, key: rsa.RSAPrivateKey | None = None, **overrides: Any) -> str:
        """An access token as Cognito issues one, with claims replaced, or removed when None."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": "user-1",
            "iss": self.issuer,
            "client_id": API_CLIENT,
            "token_use": "access",
            "scope": "sd-api/generate",
            "iat": now,
            "exp": now + 600,
            "jti": str(uuid.uuid4()),
        }
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def app(self) -> FastAPI:
        """The pool's HTTP endpoints."""
        pool = FastAPI()
        public = jwt.PyJWK.from_json(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk = {**public._jwk_data, "kid": self.kid, "alg": "RS256", "use": "sig"}

        @pool.get("/pool/.well-known/jwks.json")
        def jwks() -> dict[str, Any]:
            return {"keys": [jwk]}

        @pool.get("/oauth2/authorize")
        def authorize(
            response_type: str, client_id: str, redirect_uri: str, state: str, code_challenge: str
        ) -> RedirectResponse:
            # Managed login would ask for a password and a TOTP code here; this user is already known.
            code = secrets.token_urlsafe(8)
            self.challenges[code] = code_challenge
            return RedirectResponse(f"{redirect_uri}?{urlencode({'code': code, 'state': state})}", status_code=302)

        @pool.post("/oauth2/token")
        def token(
            request: Request,
            grant_type: str = Form(),
            client_id: str | None = Form(None),
            code: str | None = Form(None),
            code_verifier: str | None = Form(None),
            scope: str | None = Form(None),
        ) -> JSONResponse:
            if grant_type == "client_credentials":  # a program: its id and secret as HTTP Basic, the scope asked
                scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
                basic = base64.b64decode(encoded).decode() if scheme.lower() == "basic" else ":"
                if basic != f"{self.api_client_id}:{self.api_client_secret}" or scope != "sd-api/generate":
                    return JSONResponse({"error": "invalid_client"}, status_code=400)
                access = self.token(client_id=self.api_client_id)
                return JSONResponse({"access_token": access, "expires_in": 3600, "token_type": "Bearer"})
            if client_id is None or code is None or code_verifier is None:
                return JSONResponse({"error": "invalid_request"}, status_code=400)
            digest = hashlib.sha256(code_verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if grant_type != "authorization_code" or self.challenges.pop(code, None) != challenge:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(
                {"access_token": self.token(client_id=client_id), "expires_in": 3600, "token_type": "Bearer"}
            )

        return pool
