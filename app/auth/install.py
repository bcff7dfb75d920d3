"""Wire the sign-in into the app: one call from app/server.py."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from app.auth.middleware import AuthMiddleware
from app.settings import Settings
from common.auth.browser import BrowserSignIn


def install_sign_in(app: FastAPI, settings: Settings) -> None:
    """Put the sign-in middleware in front of every route when AUTH=cognito; nothing when AUTH=off."""
    if settings.auth == "off":
        return
    browser = BrowserSignIn.from_settings(settings, httpx.AsyncClient(timeout=10.0))
    app.add_middleware(AuthMiddleware, verifier=browser.verifier, browser=browser)
