"""POST /v1/images/edits: OpenAI's image edits (multipart) over the same batcher as /v1/images/generations.

`openai.OpenAI(base_url=".../v1").images.edit(image=..., mask=..., prompt=...)` works unmodified: the SDK
sends multipart/form-data (openai 3.51.0 `resources/images.py` `edit`: the files `image`, `image[]`, `mask`
and `markup`, every other field as text; `types/image_edit_params.py` names them). Without `mask` the image is
redrawn (image to image, `strength` as an extra field); with one, its fully transparent pixels are repainted
(inpainting). The body's bound is MAX_UPLOAD_BYTES-derived (Settings.edit_body_limits); each file is checked
in bytes, format and declared pixels before it is decoded (app/edit_inputs.py). Every refusal is a 4xx in
OpenAI's shape.
"""

# No `from __future__ import annotations`: FastAPI must see the route's parameter types at run time.
import asyncio
import json
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from app.api.dependencies import get_service
from app.api.images_schemas import OPTIONS, ImagesResponse, Option, images_request_fields
from app.api.openai_images import (
    OPENAI_ERROR_RESPONSES,
    RequestRefused,
    check_options,
    link_store,
    parse_body,
    resolve_group,
    serve_images,
)
from app.api.schemas import strength_field
from app.backends.base import GenerationParams
from app.edit_inputs import BadUpload, EditSource, UploadLimits, edit_source, open_image, upload_limits
from app.jobs.service import JobService
from app.service import GenerationService
from app.settings import Settings
from common.image_api_paths import IMAGES_EDITS_PATH

IMAGE_FIELDS: Final = ("image", "image[]")  # the SDK names one file `image`, a list `image[]`
MASK_FIELD: Final = "mask"
# OpenAI's edit-only fields this service cannot honour, with the reason (the shared ones are in OPTIONS).
EDIT_OPTIONS: Final = {
    "input_fidelity": Option((), "there is no fidelity control here; `strength` sets how far the result may go"),
}
REFUSED_FILES: Final = {"markup": "markup is not supported here: send a mask (its transparent pixels are repainted)"}
MAX_FORM_FIELDS: Final = 64
MAX_FORM_FILES: Final = 4

STRENGTH_DESCRIPTION: Final = (
    "this service's: how far the result may go from the image, above 0 to 1 (default: the family's edit pipeline's, "
    "docs/api.md); steps x strength must be at least 1"
)


def make_edits_request(settings: Settings) -> type[BaseModel]:
    """The text fields of POST /v1/images/edits with this deployment's limits: the generations' fields, the
    strength and the edit-only options. Lax types: a multipart field is text ("2" is the number 2)."""
    fields = {**images_request_fields(settings), "strength": strength_field(STRENGTH_DESCRIPTION)}
    for name, option in EDIT_OPTIONS.items():
        fields[name] = (Any, Field(None, description=f"accepted: {[*option.accepted, None]}"))
    return create_model("ImagesEditRequest", __config__=ConfigDict(extra="forbid"), **fields)


def _option_value(text: str) -> Any:
    """An option's multipart text as the JSON value it stands for ("false" -> False, "3" -> 3), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def read_form(request: Request) -> tuple[dict[str, str], dict[str, bytes]]:
    """The multipart body's text fields and its files' bytes (one file per name); RequestRefused otherwise."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise RequestRefused("send the edit as multipart/form-data: image (a file), prompt, and optionally mask")
    try:
        form = await request.form(max_files=MAX_FORM_FILES, max_fields=MAX_FORM_FIELDS)
    except HTTPException as exc:  # Starlette's answer to a malformed body or too many parts
        raise RequestRefused(f"the multipart body cannot be read: {exc.detail}") from None
    texts: dict[str, str] = {}
    files: dict[str, bytes] = {}
    try:
        for name, value in form.multi_items():
            if name in IMAGE_FIELDS and any(f in files for f in IMAGE_FIELDS):
                raise RequestRefused(f"{name} is sent more than once; an edit takes one image", param=name)
            if name in texts or name in files:
                raise RequestRefused(f"{name} is sent more than once; send it once", param=name)
            if isinstance(value, UploadFile):
                files[name] = await value.read()
            else:
                texts[name] = value
    finally:
        await form.close()
    return texts, files


def _field_values(texts: dict[str, str], files: dict[str, bytes]) -> dict[str, Any]:
    """The text fields as the request model reads them; RequestRefused for a file where text belongs or the
    reverse, and for refused files."""
    for name, reason in REFUSED_FILES.items():
        if name in files or name in texts:
            raise RequestRefused(reason, param=name)
    for name in (*IMAGE_FIELDS, MASK_FIELD):
        if name in texts:
            raise RequestRefused(f"{name} must be a file (multipart file upload), not text", param=name)
    unexpected = sorted(set(files) - {*IMAGE_FIELDS, MASK_FIELD})
    if unexpected:
        raise RequestRefused(f"{unexpected[0]} is not a file this route takes", param=unexpected[0])
    options = {*OPTIONS, *EDIT_OPTIONS}
    return {name: _option_value(text) if name in options else text for name, text in texts.items()}


def decode_uploads(files: dict[str, bytes], limits: UploadLimits, strength: float | None) -> EditSource:
    """The image and mask, checked and decoded (call it off the event loop); RequestRefused naming the file."""
    image_field = next((name for name in IMAGE_FIELDS if name in files), None)
    if image_field is None:
        raise RequestRefused("image is required: the picture to edit, as a file", param="image")
    try:
        image = open_image(files[image_field], "image", limits)
    except BadUpload as exc:
        raise RequestRefused(str(exc), param="image") from None
    mask = None
    try:
        if MASK_FIELD in files:
            mask = open_image(files[MASK_FIELD], "mask", limits)
        return edit_source(image, mask, strength)
    except BadUpload as exc:
        raise RequestRefused(str(exc), param=MASK_FIELD) from None


def check_auto_size(service: GenerationService, body: dict[str, Any], source: EditSource) -> None:
    """Without a size the image's own is the answer's: RequestRefused naming size when the model cannot serve it."""
    if body["size"] not in (None, "auto"):
        return
    width, height = source.image.size
    problems = service.size_bounds.problems(width, height, service.family.title)
    if problems:
        message = f"the image is {width}x{height}, which cannot be served ({'; '.join(problems)}): send a size"
        raise RequestRefused(message, param="size")


def edits_router(settings: Settings) -> APIRouter:
    """The router for POST /v1/images/edits, with the form's model carrying this deployment's bounds."""
    router = APIRouter(tags=["openai"])
    request_model = make_edits_request(settings)
    limits = upload_limits(settings)
    schema = request_model.model_json_schema()
    binary = {"type": "string", "format": "binary"}
    schema["properties"] = {**schema["properties"], "image": binary, MASK_FIELD: binary}
    schema["required"] = [*schema.get("required", []), "image"]

    @router.post(
        IMAGES_EDITS_PATH,
        response_model=ImagesResponse,
        responses=OPENAI_ERROR_RESPONSES,
        openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}},
    )
    async def images_edits(request: Request, service: Annotated[GenerationService, Depends(get_service)]) -> Response:
        """Edit an image (OpenAI's Images API): without `mask` image to image, with one inpainting."""

        async def prepare() -> tuple[list[GenerationParams], JobService | None]:
            texts, files = await read_form(request)
            body = parse_body(request_model, _field_values(texts, files)).model_dump()
            check_options(body, {**OPTIONS, **EDIT_OPTIONS})
            source = await asyncio.to_thread(decode_uploads, files, limits, body["strength"])
            check_auto_size(service, body, source)
            group = await asyncio.to_thread(resolve_group, service, body, source)
            return group, link_store(body, request)

        return await serve_images(request, service, settings, prepare)

    return router
