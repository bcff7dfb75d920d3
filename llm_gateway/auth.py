"""Who is calling: the image service's Cognito access tokens (`Authorization: Bearer`), checked by its verifier.

`common.auth.tokens` imports only httpx and PyJWT (and the `app`/`app.auth` package docstrings), so the
gateway reuses it without the Stable Diffusion service. Programs only: the gateway has no browser sign-in
(a chat page served beside it would send the same bearer token). The official `openai` client sends its
`api_key` as that bearer token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from common.auth.tokens import KeysUnavailable, TokenError, TokenVerifier

log = logging.getLogger(__name__)
CHALLENGE = (b"www-authenticate", b'Bearer realm="llm", error="invalid_token"')


@dataclass(frozen=True)
class Refusal:
    """Why a request may not pass: its status and message."""

    status: int
    message: str


def bearer_token(headers: dict[bytes, bytes]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if any."""
    scheme, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


async def check_caller(verifier: TokenVerifier | None, headers: dict[bytes, bytes]) -> Refusal | None:
    """None when the caller may pass (or sign-in is off), else the refusal to answer with."""
    if verifier is None:
        return None
    token = bearer_token(headers)
    if token is None:
        return Refusal(401, "sign in first: send 'Authorization: Bearer <access token>' (the openai client's api_key)")
    try:
        await verifier.verify(token)
    except TokenError as exc:
        return Refusal(401, str(exc))
    except KeysUnavailable as exc:
        log.error("sign-in keys unavailable", extra={"event": "auth_keys_unavailable", "reason": str(exc)})
        return Refusal(503, "sign-in is unavailable right now; try again shortly")
    return None
