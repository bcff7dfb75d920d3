"""The FastAPI application: API routers, error handling, middleware, the Gradio UI, and the lifespan.

`create_app(settings, load_backend)` takes the backend loader as an argument, so tests can serve a
stand-in backend through the very same stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount

from app.api import adapters, edits, generate, info, models, openai_images, probes
from app.api.docs import install_offline_docs
from app.api.errors import install_error_handlers, unexpected_error
from app.api.fallback import install_api_fallback
from app.api.gradio_guard import GradioIdGuard
from app.api.gradio_uploads import UPLOAD_PATHS, UploadCheck
from app.api.middleware import BodyLimitMiddleware, RequestLogMiddleware
from app.auth.install import install_sign_in
from app.backends.selection import load_backend as default_backend_loader
from app.edit_inputs import upload_limits
from app.jobs.routes import jobs_router
from app.jobs.runtime import build_jobs
from app.service import BackendLoader, GenerationService
from app.settings import Settings
from common.image_api_paths import IMAGES_EDITS_PATH
from common.settings import SettingsError

API_DESCRIPTION = """Stable Diffusion on Inferentia2, NVIDIA GPUs or the CPU.

`POST /v1/generate` returns a PNG (or base64 JSON with `Accept: application/json`);
`POST /v1/images/generations` is OpenAI's Images API (the official `openai` client works unmodified).
Readiness turns 200 once the model is loaded and warmed up."""


def create_app(settings: Settings, load_backend: BackendLoader = default_backend_loader) -> FastAPI:
    """Build the app; the model loads in the background once the server starts. SettingsError when
    the jobs directory cannot be used."""
    service = GenerationService(settings, load_backend)
    try:
        jobs = build_jobs(settings, service)
    except (OSError, sqlite3.Error) as exc:  # JOBS=local: the directory cannot hold the queue and records
        where = settings.jobs_dir or f"{settings.model_cache_dir / 'jobs'} (unset: MODEL_CACHE_DIR/jobs)"
        raise SettingsError(
            f"JOBS_DIR={where} cannot keep jobs ({exc}); point JOBS_DIR at a writable directory, or set JOBS=off"
        ) from None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Load in the background: /health answers and /readiness says 503 while the model loads.
        loading = asyncio.create_task(service.start(), name="load-model")
        if jobs is not None:
            jobs.worker.start()  # it takes jobs once the model is ready
        try:
            yield
        finally:
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loading
            if jobs is not None:
                await jobs.worker.stop()
            await service.stop()

    app = FastAPI(
        title="Stable Diffusion service",
        description=API_DESCRIPTION,
        version="1.0",
        lifespan=lifespan,
        docs_url=None,  # install_offline_docs serves /docs and /redoc without a CDN
        redoc_url=None,
    )
    app.state.service = service
    app.state.jobs = jobs
    install_error_handlers(app)
    install_offline_docs(app)
    app.include_router(probes.router)
    app.include_router(info.router)
    app.include_router(generate.generate_router(settings))
    app.include_router(openai_images.images_router(settings))
    app.include_router(adapters.adapters_router())
    app.include_router(edits.edits_router(settings))
    app.include_router(models.models_router())
    if jobs is not None:
        app.include_router(jobs_router(settings))
    install_api_fallback(app)  # after every /v1 route, before the UI's catch-all mount
    ui = _build_ui(service) if settings.ui else None
    if ui is not None:
        app.add_middleware(GradioIdGuard, blocks=ui)  # inside the body limit: it reads a bounded body
        app.add_middleware(UploadCheck, limits=upload_limits(settings))  # images only, before Gradio keeps them
    # The edits route's multipart body and the UI's uploads carry image files: the larger bound MAX_UPLOAD_BYTES
    # implies.
    upload_routes = (IMAGES_EDITS_PATH, *(UPLOAD_PATHS if ui is not None else ()))
    app.add_middleware(
        BodyLimitMiddleware,
        limits=settings.body_limits,
        path_limits=dict.fromkeys(upload_routes, settings.edit_body_limits),
    )
    install_sign_in(app, settings)  # outside the body limit, inside the request log: 401s are logged
    # Same-origin only, for the API and the UI. Gradio's own CORS middleware would grant any
    # http://localhost:* origin credentialed access to every route, /v1 included; it stands aside when
    # the parent app has Starlette's CORSMiddleware (gradio 6.31 route_utils.CustomCORSMiddleware).
    app.add_middleware(CORSMiddleware, allow_origins=[], allow_credentials=False)
    app.add_middleware(RequestLogMiddleware)
    if ui is not None:
        import gradio as gr

        from app.ui_files import hide_cache_dir
        from app.ui_routes import serve_only_ui_routes

        # Mounted last: the API routes above are matched first, the UI gets everything else.
        # PUBLIC_URL: behind CloudFront the ALB says X-Forwarded-Proto: http, and Gradio would build
        # http:// links for an https page. show_error=False: an unexpected exception reaches the
        # browser as a bare "Error", never its text.
        app = gr.mount_gradio_app(
            app,
            ui,
            path="/",
            footer_links=[],
            root_path=settings.public_url or None,
            show_error=False,
        )
        # Gradio's app answers its own unexpected errors with a plain-text 500; ours is JSON with an id.
        mount = app.router.routes[-1]
        assert isinstance(mount, Mount), "mount_gradio_app appends the UI's mount"
        mount.app.add_exception_handler(Exception, unexpected_error)  # type: ignore[attr-defined]
        serve_only_ui_routes(app)
        hide_cache_dir(app, ui.GRADIO_CACHE)  # outside the route filter: file links are whole again there
    return app


def _build_ui(service: GenerationService) -> Any:  # gradio.Blocks; gradio is imported only with the UI
    # The one place the service turns Gradio's usage reporting off: right before it loads.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from app.ui import build_ui

    return build_ui(service)
