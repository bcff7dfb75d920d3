"""POST /v1/images/generations: OpenAI's Images API over the same batcher as /v1/generate.

`openai.OpenAI(base_url=".../v1", api_key=<token>).images.generate(...)` works unmodified: the body is read
as the SDK sends it (app/api/images_schemas.py), the n images queue together (one batch per shape), and
every error is in OpenAI's shape (app/api/openai_errors.py), so the SDK raises its own error classes with
a readable message. `response_format="url"` stores the PNGs in the jobs store and answers links that
expire: an S3 presigned URL on the cluster, a signed link to this service locally (app/jobs/signing.py).
"""

# No `from __future__ import annotations`: FastAPI must see the route's parameter types at run time.
import asyncio
import base64
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ValidationError

from app.api.dependencies import get_service
from app.api.errors import describe_errors
from app.api.generate import png_bytes
from app.api.images_schemas import OPTIONS, ImageData, ImagesResponse, Option, make_images_request, parse_size
from app.api.openai_errors import openai_error
from app.backends.base import GenerationParams, LoraRefused, UnsupportedRequest
from app.batching import DeadlineExceeded, QueueFull, ShutdownCut
from app.edit_inputs import EditSource
from app.jobs.routes import image_link
from app.jobs.service import JobService
from app.params import MAX_SEED, resolve_params
from app.service import GenerationService, NotReady
from app.settings import Settings
from common.http.disconnect import CLIENT_CLOSED_REQUEST, ClientDisconnected, unless_disconnected
from common.image_api_errors import openai_error_body
from common.image_api_paths import IMAGES_GENERATIONS_PATH
from common.logs import log_failure

log = logging.getLogger(__name__)


class RequestRefused(Exception):
    """A request this route answers with an OpenAI-shaped error of its own (a 400, or a 503 for the result store)."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.code, self.status = message, param, code, status


def _error_doc(text: str) -> dict[str, Any]:
    example = openai_error_body(400, "size 4096x4096 cannot be served: width must be ...", param="size")
    return {"description": text, "content": {"application/json": {"example": example}}}


OPENAI_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: _error_doc(text)
    for code, text in (
        (400, "invalid input, a size or option this deployment cannot serve, or url without a result store"),
        (401, "no valid token"),
        (413, "body too large"),
        (429, "queue full; retry after the Retry-After seconds"),
        (500, "internal failure; the message has an error id"),
        (503, "model loading, service shutting down, or the result store unavailable"),
        (504, "the request waited past its deadline"),
    )
}


def _parse(model: type[BaseModel], raw: bytes) -> BaseModel:
    """The body as the request model, or RequestRefused naming the first bad field (no input echo)."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise _refusal(exc) from None


def parse_body(model: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    """Already-read fields (a multipart form's) as the request model, or RequestRefused naming the first bad one."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise _refusal(exc) from None


def _refusal(exc: ValidationError) -> RequestRefused:
    message, detail = describe_errors(exc.errors(include_input=False))
    return RequestRefused(message, param=detail[0]["field"] if detail else None)


def check_options(body: dict[str, Any], options: Mapping[str, Option] = OPTIONS) -> None:
    """Refuse OpenAI options this service cannot honour, with the reason."""
    for name, option in options.items():
        value = body.get(name)
        if not option.takes(value):
            shown = f" {value!r}" if isinstance(value, str | int | bool) and len(repr(value)) <= 40 else ""
            raise RequestRefused(f"{name}{shown} is not supported here: {option.reason}", param=name)


def resolve_group(
    service: GenerationService, body: dict[str, Any], edit: EditSource | None = None
) -> list[GenerationParams]:
    """The body as one GenerationParams per image (each an edit of `edit` when given): the first image's seed,
    then the next seeds (RequestRefused for a model, size or bound this deployment does not serve)."""
    served = service.model_name
    if body["model"] is not None and body["model"] != served:
        message = f"model {body['model']!r} is not served here; omit model or send {served!r} (GET /v1/models)"
        raise RequestRefused(message, param="model", code="model_not_found")
    n = body["n"] or 1
    try:
        size = parse_size(body["size"])
    except ValueError as exc:
        raise RequestRefused(str(exc), param="size") from None
    width, height = size if size is not None else (None, None)
    try:
        first = resolve_params(
            service,
            prompt=body["prompt"],
            negative_prompt=body["negative_prompt"],
            steps=body["steps"],
            guidance_scale=body["guidance_scale"],
            width=width,
            height=height,
            seed=body["seed"],
            loras=body["loras"],
            edit=edit,
        )
    except LoraRefused as exc:
        raise RequestRefused(str(exc), param="loras") from None
    except UnsupportedRequest as exc:
        # OpenAI's `param` names one field: the first problem's; a size problem says which size was asked.
        field = exc.problems[0][0] if exc.problems else None
        if field in ("size", "width", "height") and size is not None:
            raise RequestRefused(f"size {body['size']} cannot be served: {exc}", param="size") from None
        raise RequestRefused(f"this request cannot be served: {exc}", param=field) from None
    # Image i draws with the next seeds, wrapping inside the seed range as a random first seed may be near its top.
    return [dataclasses.replace(first, seed=(first.seed + i) % (MAX_SEED + 1)) for i in range(n)]


def link_store(body: dict[str, Any], request: Request) -> JobService | None:
    """The jobs service whose store keeps `url` answers' images, None for b64_json; RequestRefused for url
    without a store, before any image is drawn."""
    if body["response_format"] != "url":
        return None
    if request.app.state.jobs is None:
        raise RequestRefused(
            "response_format url needs a result store to link to, and this deployment runs without one (JOBS=off); "
            "use b64_json",
            param="response_format",
        )
    return request.app.state.jobs.service


async def _as_data(pngs: list[bytes], store: JobService | None, request: Request, public_url: str) -> list[ImageData]:
    """The images as base64, or (with a store) stored and linked; RequestRefused if the store fails."""
    if store is None:
        return [ImageData(b64_json=base64.b64encode(png).decode("ascii")) for png in pngs]
    data = []
    for png in pngs:
        try:
            image_id = await store.keep_image(png)
            link, _ttl = await image_link(image_id, request, store, public_url)
        except Exception as exc:  # the store's errors: a full disk, S3 unreachable
            error_id = log_failure(log, "storing an Images API result failed", exc)
            raise RequestRefused(
                f"the result store is unavailable; retry, or use b64_json (error id {error_id})", status=503
            ) from None
        if link is None:  # a store with no links of its own and no signer: not a configuration this app builds
            raise RequestRefused("this deployment cannot link to its results; use b64_json", param="response_format")
        data.append(ImageData(url=link))
    return data


async def _answer_images(
    request: Request,
    service: GenerationService,
    settings: Settings,
    group: list[GenerationParams],
    store: JobService | None,
    started: float,
) -> tuple[int, int, Response]:
    """Queue a resolved group, wait for its images and answer them as ImagesResponse (or an OpenAI-shaped error);
    (status, images answered, response)."""
    try:
        results = await unless_disconnected(request.receive, service.generate_many(group))
    except ClientDisconnected:
        return CLIENT_CLOSED_REQUEST, 0, Response(status_code=CLIENT_CLOSED_REQUEST)
    except NotReady as exc:
        return 503, 0, openai_error(503, str(exc), code="not_ready", headers={"Retry-After": "5"})
    except QueueFull:
        message = "the queue is full; retry later"
        return 429, 0, openai_error(429, message, code="queue_full", headers={"Retry-After": "1"})
    except ShutdownCut as exc:
        error_id = log_failure(log, "shutdown grace over before the images were ready", exc)
        message = f"the service shut down before these images were ready; retry (error id {error_id})"
        return 503, 0, openai_error(503, message, headers={"Retry-After": "1"})
    except DeadlineExceeded:
        message = f"no images within {settings.request_timeout_s:g} s"
        return 504, 0, openai_error(504, message, code="timeout")
    except Exception as exc:
        error_id = log_failure(log, "generation failed", exc)
        return 500, 0, openai_error(500, f"internal error while generating (error id {error_id})")
    pngs = await asyncio.to_thread(lambda: [png_bytes(result.image) for result in results])
    try:
        data = await _as_data(pngs, store, request, settings.public_url)
    except RequestRefused as refused:
        error = openai_error(refused.status, refused.message, param=refused.param, code=refused.code)
        return refused.status, 0, error
    backend = service.backend.name if service.backend else "unknown"
    request.state.backend = backend
    request.state.batch_size = max(result.batch_size for result in results)
    first = group[0]
    answer = ImagesResponse(created=int(time.time()), data=data, size=f"{first.width}x{first.height}")
    headers = {
        "X-Seed": str(first.seed),
        "X-Backend": backend,
        "X-Batch-Size": ",".join(str(result.batch_size) for result in results),
        "X-Latency-Ms": f"{(time.perf_counter() - started) * 1000.0:.1f}",
    }
    response = Response(answer.model_dump_json(exclude_none=True), media_type="application/json", headers=headers)
    return 200, len(data), response


async def serve_images(
    request: Request,
    service: GenerationService,
    settings: Settings,
    prepare: Callable[[], Awaitable[tuple[list[GenerationParams], JobService | None]]],
) -> Response:
    """An Images API route's answer: `prepare` reads and checks the request into one group and where its links are
    kept (RequestRefused: its OpenAI-shaped 4xx), then the group's images; every outcome counts in the service's
    metrics. Shared by the generations and edits routes."""
    started = time.perf_counter()
    status, images = 500, 0
    try:
        try:
            group, store = await prepare()
        except RequestRefused as refused:
            status = refused.status
            return openai_error(status, refused.message, param=refused.param, code=refused.code)
        status, images, response = await _answer_images(request, service, settings, group, store, started)
        return response
    finally:
        service.record(status, (time.perf_counter() - started) * 1000.0, images)


def images_router(settings: Settings) -> APIRouter:
    """The router for POST /v1/images/generations, with a body model carrying this deployment's bounds."""
    router = APIRouter(tags=["openai"])
    request_model = make_images_request(settings)
    schema = request_model.model_json_schema()

    @router.post(
        IMAGES_GENERATIONS_PATH,
        response_model=ImagesResponse,
        responses=OPENAI_ERROR_RESPONSES,
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}},
    )
    async def images_generations(
        request: Request, service: Annotated[GenerationService, Depends(get_service)]
    ) -> Response:
        """Generate n images (OpenAI's Images API): base64 PNGs, or links with `response_format: "url"`."""

        async def prepare() -> tuple[list[GenerationParams], JobService | None]:
            body = _parse(request_model, await request.body()).model_dump()
            check_options(body)
            return resolve_group(service, body), link_store(body, request)

        return await serve_images(request, service, settings, prepare)

    return router
