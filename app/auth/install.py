"""Wire the sign-in into the app: one call from app/server.py."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from app.auth.browser import BrowserSignIn
from app.auth.middleware import AuthMiddleware
from app.settings import Settings
from common.auth.tokens import TokenVerifier


def install_sign_in(app: FastAPI, settings: Settings) -> None:
    """Put the sign-in middleware in front of every route when AUTH=cognito; nothing when AUTH=off."""
    if settings.auth == "off":
        return
    http = httpx.AsyncClient(timeout=10.0)
    verifier = TokenVerifier(settings.auth_issuer, settings.auth_client_id_list, http=http)
    browser = BrowserSignIn(
        verifier=verifier,
        client_id=settings.auth_ui_client_id,
        login_url=settings.auth_login_url,
        public_url=settings.public_url,
        http=http,
    )
    app.add_middleware(AuthMiddleware, verifier=verifier, browser=browser)
