"""Serve only the Gradio routes that the UI page and `gradio_client` use; the rest answer 404.

Gradio mounts some sixty routes (gradio 6.31 `routes.py`): dev-mode reload streams, screen-recording
processing, a monitoring dashboard, run history, vibe editing, upload progress, streaming and REST variants of
every call. The page and the client need a handful. The list below is what a real Chromium requests
while it loads the page, waits for the model, opens the options, generates, fails validation and
reloads, plus what `gradio_client` requests for `view_api()` and `predict()`; the tests record both
(tests/browser/test_ui_routes.py, tests/app/test_ui_routes.py), so a Gradio upgrade that needs another
route fails there, not in production.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.middleware import send_json_error

# (method, path) served as is.
EXACT: Final = frozenset(
    {
        ("GET", "/"),
        ("HEAD", "/"),
        ("GET", "/config"),  # gradio_client reads the page's config
        ("GET", "/theme.css"),
        ("GET", "/favicon.ico"),
        ("GET", "/gradio_api/info"),  # gradio_client's view_api()
        ("POST", "/gradio_api/run/predict"),  # the page's unqueued events: the model status on load and while loading
        ("POST", "/gradio_api/queue/join"),
        ("GET", "/gradio_api/queue/data"),  # the event stream of a queued call
        # The Edit tab's image editor: the picked file, then the canvas's image and drawn layer
        # (app/api/gradio_uploads.py checks both for images within the upload limits first).
        ("POST", "/gradio_api/upload"),
        ("POST", "/gradio_api/component_server"),
    }
)
# (method, path prefix): the page's scripts and styles, and the generated images.
PREFIXES: Final = (
    ("GET", "/assets/"),
    ("GET", "/static/"),
    ("GET", "/gradio_api/file="),
    ("HEAD", "/gradio_api/file="),
)


def ui_route_allowed(method: str, path: str) -> bool:
    """True for a request the UI page or gradio_client makes."""
    return (method, path) in EXACT or any(method == m and path.startswith(p) for m, p in PREFIXES)


_METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class UiRoutesOnly:
    """ASGI wrapper around the Gradio app: other routes answer 404, or 405 for a known path (the UI's or,
    since every request no route takes ends here, the API's) asked with another method."""

    def __init__(self, app: ASGIApp, api_routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._api_routes = api_routes
        self._ui_methods: dict[str, list[str]] = {}
        for method, path in EXACT:
            self._ui_methods.setdefault(path, []).append(method)

    def _allowed_methods(self, scope: Scope) -> list[str]:
        path = scope["path"]
        if path in self._ui_methods:
            return sorted(self._ui_methods[path])
        return [
            method
            for method in _METHODS
            if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in self._api_routes)
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        method, path = scope.get("method", "GET"), scope["path"]
        if scope["type"] == "http" and ui_route_allowed(method, path):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # the UI opens no websockets
            return
        allowed = self._allowed_methods(scope)
        if allowed:
            allow = [(b"allow", ", ".join(allowed).encode())]
            message = f"{method} is not allowed on {path}; use {', '.join(allowed)}"  # as app/api/fallback.py says it
            await send_json_error(send, 405, message, extra_headers=allow, close=False)
            return
        await send_json_error(send, 404, "not found", close=False)


def serve_only_ui_routes(app: FastAPI) -> None:
    """Wrap the Gradio app that `gr.mount_gradio_app(app, ..., path="/")` mounted."""
    (mount,) = [route for route in app.router.routes if isinstance(route, Mount) and route.path == ""]
    api_routes = [route for route in app.router.routes if route is not mount]
    mount.app = UiRoutesOnly(mount.app, api_routes)
