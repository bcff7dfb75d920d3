"""Verify Cognito access tokens: RS256 signature against the user pool's JWKS, issuer, expiry,
token_use and client id (Amazon Cognito Developer Guide, "Verifying JSON web tokens": access tokens
carry `client_id` and `token_use=access`, and no `aud`). PyJWT 2.15.1 does the JWT work
(`jwt.decode`, `jwt.PyJWKSet`; checked against the installed package, pinned in requirements.txt).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

import httpx
import jwt

ALGORITHM: Final = "RS256"  # what Cognito signs with
ACCESS_TOKEN_USE: Final = "access"  # noqa: S105 - a claim value (ID tokens say "id"), not a secret
REQUIRED_CLAIMS: Final = ("exp", "iss", "token_use", "client_id", "sub")


class TokenError(Exception):
    """The token cannot be accepted; the message says why, for the 401 body."""


class KeysUnavailable(Exception):
    """The issuer's signing keys could not be fetched (a 503, not the caller's fault)."""


@dataclass(frozen=True)
class Identity:
    """Who a verified token speaks for."""

    subject: str


class TokenVerifier:
    """Checks access tokens of one issuer for a set of app clients; caches the issuer's keys."""

    def __init__(
        self,
        issuer: str,
        client_ids: Collection[str],
        *,
        http: httpx.AsyncClient | None = None,
        refresh_after_s: float = 60.0,
        retry_after_failure_s: float = 2.0,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.client_ids = frozenset(client_ids)
        self.jwks_url = f"{self.issuer}/.well-known/jwks.json"
        self._http = http or httpx.AsyncClient(timeout=5.0)
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._refresh_after_s = refresh_after_s
        self._retry_after_failure_s = retry_after_failure_s
        self._failure: str | None = None  # why the last fetch failed; None once one succeeded
        self._lock = asyncio.Lock()

    async def verify(self, token: str) -> Identity:
        """The token's identity, or TokenError with a readable reason."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenError("the token is not a well-formed JWT") from None
        if header.get("alg") != ALGORITHM:
            raise TokenError(f"the token must be signed with {ALGORITHM}")
        key = await self._key(str(header.get("kid", "")))
        claims = self._decode(token, key)
        if claims["token_use"] != ACCESS_TOKEN_USE:
            raise TokenError("an access token is required (token_use=access), not an ID token")
        if claims["client_id"] not in self.client_ids:
            raise TokenError("the token was issued to an app client this service does not accept")
        return Identity(subject=str(claims["sub"]))

    def _decode(self, token: str, key: jwt.PyJWK) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                issuer=self.issuer,
                # Cognito access tokens have no `aud`; the client id is checked above instead.
                options={"require": list(REQUIRED_CLAIMS), "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise TokenError("the token has expired: get a new one") from None
        except jwt.InvalidIssuerError:
            raise TokenError("the token was issued by another issuer") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenError(f"the token has no '{exc.claim}' claim") from None
        except jwt.InvalidSignatureError:
            raise TokenError("the token's signature does not verify") from None
        except jwt.PyJWTError:
            raise TokenError("the token is invalid") from None

    async def _key(self, kid: str) -> jwt.PyJWK:
        key = self._keys.get(kid)
        if key is not None:
            return key
        async with self._lock:
            # Keys rotate rarely: refetch for an unknown kid, but at most once per refresh_after_s,
            # so a flood of made-up kids cannot turn into a flood of JWKS requests. A failed fetch
            # counts too: until retry_after_failure_s has passed, every unknown kid gets its 503 at once.
            if kid not in self._keys:
                since = time.monotonic() - self._fetched_at
                if self._failure is not None and since < self._retry_after_failure_s:
                    raise KeysUnavailable(self._failure)
                if self._failure is not None or since >= self._refresh_after_s:
                    await self._fetch()
        key = self._keys.get(kid)
        if key is None:
            raise TokenError("the token was signed with a key the issuer does not publish")
        return key

    async def _fetch(self) -> None:
        self._fetched_at = time.monotonic()
        try:
            response = await self._http.get(self.jwks_url)
            response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            self._failure = f"could not read the sign-in keys from {self.jwks_url}: {exc}"
            raise KeysUnavailable(self._failure) from None
        self._keys = {k.key_id: k for k in keys.keys if k.key_id}
        self._failure = None
