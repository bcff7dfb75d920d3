"""The environment variable names of the sign-in settings, shared by the service (app/settings.py
fields of the same names) and the CDK code that writes them into the pods' ConfigMap."""

from __future__ import annotations

from typing import Final

AUTH: Final = "AUTH"  # off | cognito
AUTH_ISSUER: Final = "AUTH_ISSUER"  # https://cognito-idp.<region>.amazonaws.com/<user pool id>
AUTH_CLIENT_IDS: Final = "AUTH_CLIENT_IDS"  # comma-separated app client ids whose access tokens are accepted
AUTH_UI_CLIENT_ID: Final = "AUTH_UI_CLIENT_ID"  # the browser sign-in's app client (no secret, PKCE)
AUTH_LOGIN_URL: Final = "AUTH_LOGIN_URL"  # the user pool domain: https://<prefix>.auth.<region>.amazoncognito.com
PUBLIC_URL: Final = "PUBLIC_URL"  # where browsers reach the service: https://<host> (also the UI's root URL)

# Paths the middleware serves itself, before anything else; the callback URL registered on the UI
# app client is PUBLIC_URL + CALLBACK_PATH and the sign-out URL PUBLIC_URL + "/".
LOGIN_PATH: Final = "/auth/login"
CALLBACK_PATH: Final = "/auth/callback"
LOGOUT_PATH: Final = "/auth/logout"
