"""/docs (Swagger UI) with its script and styles served by the service, not a CDN.

FastAPI's own page loads Swagger UI from cdn.jsdelivr.net and a favicon from fastapi.tiangolo.com, so it
is blank on an offline laptop or a pod without internet access. The files come from the fastapi-offline
package (requirements.txt), which bundles swagger-ui 5 (it renders OpenAPI 3.1). There is no /redoc: ReDoc
fetches its logo from cdn.redoc.ly whatever its options, and /docs is the one page the README names.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH: Final = "/docs"
ASSETS_PATH: Final = "/docs/assets"
OAUTH2_REDIRECT_PATH: Final = "/docs/oauth2-redirect"
# fastapi-offline 1.7.7 keeps them in its package: static/swagger-ui-bundle.js, swagger-ui.css, favicon.png.
ASSETS_DIR: Final = files("fastapi_offline") / "static"


def install_offline_docs(app: FastAPI) -> None:
    """Serve /docs, /docs/oauth2-redirect and their files; build `app` with docs_url=None and
    redoc_url=None so that FastAPI's CDN pages are not there too."""
    app.mount(ASSETS_PATH, StaticFiles(directory=str(ASSETS_DIR)), name="docs-assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")  # as FastAPI's own page does
        assets = root + ASSETS_PATH
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_PATH,
        )

    @app.get(OAUTH2_REDIRECT_PATH, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
