"""Check the files the UI uploads before Gradio keeps them: images only, within MAX_UPLOAD_BYTES and MAX_UPLOAD_PIXELS.

The Edit tab's image editor sends files through two Gradio routes (gradio 6.31): `/gradio_api/upload` (routes.py
`upload_file`: the picture the user picks, written under GRADIO_TEMP_DIR) and `/gradio_api/component_server`
(the editor's `accept_blobs`, components/image_editor.py: the picture and the drawn layer as PNGs, kept in memory
until the edit runs). This middleware sits inside the body limit (which bounds those two routes like the edits
route), opens every file part of a multipart body with app/edit_inputs.py's checks, and answers a 422 in the API's
error shape, naming the file and what is wrong, before Gradio writes or keeps anything. A 422's `detail` is what the
page shows (see app/api/gradio_guard.py).
"""

from __future__ import annotations

import asyncio
from typing import Final

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.gradio_guard import COMPONENT_SERVER_PATH
from app.api.middleware import replaying, send_json_error
from app.edit_inputs import BadUpload, UploadLimits, open_image

GRADIO_UPLOAD_PATH: Final = "/gradio_api/upload"  # gradio 6.31 routes.py `@router.post("/upload")`
UPLOAD_PATHS: Final = (GRADIO_UPLOAD_PATH, COMPONENT_SERVER_PATH)
MAX_FILES: Final = 2  # the editor sends one file per request; a second one is still an image and a mask's worth
MAX_FIELDS: Final = 16
# The editor's `accept_blobs` grows a list of layers to the `index` the page sends (gradio 6.31
# components/image_editor.py: `layers.extend([None] * (index + 1 - len(layers)))`), so an index of a billion would
# allocate gigabytes: the Edit tab's ImageMask draws one layer, and a few are allowed.
MAX_LAYER_INDEX: Final = 3
BLOB_TYPES: Final = frozenset({"background", "layer", "composite"})
ACCEPT_BLOBS: Final = "accept_blobs"  # the editor's server function that keeps the canvas


class UploadRefused(Exception):
    """A UI upload that is not served: `field` and `message` are the 422's detail."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


async def check_upload(scope: Scope, body: bytes, limits: UploadLimits) -> None:
    """Open every file in a multipart `body` as an uploaded image would be; UploadRefused for the first bad one.

    A body with no file part passes (component_server's other calls, which Gradio answers itself); an upload route
    body that is not multipart is refused, since Gradio would take anything there.
    """
    content_type = dict(scope["headers"]).get(b"content-type", b"")
    if not content_type.startswith(b"multipart/form-data"):
        if scope["path"].rstrip("/") == GRADIO_UPLOAD_PATH:
            raise UploadRefused("files", "send the image as multipart/form-data (a PNG, JPEG or WebP file)")
        return

    async def once() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        async with Request(scope, once).form(max_files=MAX_FILES, max_fields=MAX_FIELDS) as form:
            files = [(name, value) for name, value in form.multi_items() if isinstance(value, UploadFile)]
            contents = [(name, value.filename or name, await value.read()) for name, value in files]
            fields = {name: value for name, value in form.multi_items() if isinstance(value, str)}
    except HTTPException as exc:  # Starlette's answer to a malformed body or too many parts
        raise UploadRefused("files", f"the upload cannot be read: {exc.detail}") from None
    if scope["path"].rstrip("/") == COMPONENT_SERVER_PATH:
        if fields.get("fn_name") != ACCEPT_BLOBS:
            return  # no other server function keeps a file: Gradio (or the guard's 404) answers it
        check_blob_fields(fields)
    for field, filename, data in contents:
        try:
            # Decoding is CPU work on up to MAX_UPLOAD_PIXELS: off the event loop.
            await asyncio.to_thread(open_image, data, filename, limits)
        except BadUpload as exc:
            raise UploadRefused(field, str(exc)) from None


def check_blob_fields(fields: dict[str, str]) -> None:
    """The editor's blob fields: a known `type`, and a layer `index` within MAX_LAYER_INDEX; UploadRefused else."""
    if fields.get("type") not in BLOB_TYPES:
        raise UploadRefused("type", f"type must be one of {', '.join(sorted(BLOB_TYPES))}")
    index = fields.get("index", "null")
    if index in ("", "null"):
        return
    if not index.isdigit() or int(index) > MAX_LAYER_INDEX:
        raise UploadRefused("index", f"index must be a layer number from 0 to {MAX_LAYER_INDEX}")


class UploadCheck:
    """ASGI middleware: 422 for a UI upload that is not a PNG, JPEG or WebP image within the upload limits."""

    def __init__(self, app: ASGIApp, limits: UploadLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/") not in UPLOAD_PATHS:
            await self.app(scope, receive, send)
            return
        message = await receive()  # the body limit (outside this) replays the whole body in one message
        try:
            await check_upload(scope, message.get("body", b""), self.limits)
        except UploadRefused as refused:
            detail = [{"field": refused.field, "message": refused.message}]
            await send_json_error(send, 422, f"invalid upload: {refused.message}", detail=detail, close=False)
            return
        await self.app(scope, replaying(message, receive), send)
