"""Uploaded images for edits: checked in bytes, format and pixels before they are decoded, then prepared.

Pillow's `Image.open` reads only the file's header; the format and the declared width x height are checked
there, so a decompression bomb (a small file that declares a huge image) is refused before `load()` would
allocate it. Only PNG, JPEG and WebP decoders are tried. A mask follows OpenAI's convention when it has an
alpha channel (fully transparent pixels are repainted) and diffusers' otherwise (white pixels are repainted).
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from dataclasses import dataclass
from typing import Any, Final

from PIL import Image, UnidentifiedImageError

from app.backends.base import EditInput, UnsupportedRequest
from app.settings import Settings

FORMATS: Final = ("PNG", "JPEG", "WEBP")
"""The decoders tried on an upload (Pillow's format names)."""


class BadUpload(UnsupportedRequest):
    """An upload that is refused (too large, not an image, a bomb, a mask of another size): a 4xx wherever a
    request the service cannot take is one, naming `field` (the upload's: image, mask, init_image, mask_image)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__((field, message))


@dataclass(frozen=True)
class UploadLimits:
    """How large an uploaded image may be: file bytes and declared pixels (MAX_UPLOAD_BYTES, MAX_UPLOAD_PIXELS)."""

    max_bytes: int
    max_pixels: int


def upload_limits(settings: Settings) -> UploadLimits:
    """MAX_UPLOAD_BYTES and MAX_UPLOAD_PIXELS."""
    return UploadLimits(max_bytes=settings.max_upload_bytes, max_pixels=settings.max_upload_pixels)


def decode_base64(text: str, what: str) -> bytes:
    """A JSON field's base64 text as bytes (a `data:` URL prefix is allowed); BadUpload if it is not base64."""
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadUpload(f"{what} is not base64", what) from None


def open_image(data: bytes, what: str, limits: UploadLimits) -> Image.Image:
    """Decode an uploaded file after checking its size, format and declared pixels; BadUpload naming `what`."""
    if len(data) > limits.max_bytes:
        raise BadUpload(f"{what} is {len(data)} bytes; the limit is {limits.max_bytes}", what)
    try:
        with warnings.catch_warnings():
            # Pillow warns (and past twice its own cap raises) at open(); the cap below is ours and lower.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError:  # past twice Pillow's own cap, which is above ours
        raise BadUpload(f"{what} declares more pixels than the limit of {limits.max_pixels}", what) from None
    except (UnidentifiedImageError, OSError):
        raise BadUpload(f"{what} is not a PNG, JPEG or WebP image", what) from None
    width, height = image.size
    if width * height > limits.max_pixels:
        raise BadUpload(f"{what} is {width}x{height} pixels; the limit is {limits.max_pixels} pixels", what)
    try:
        image.load()
    except (OSError, ValueError, SyntaxError):  # a truncated or corrupt file whose header looked right
        raise BadUpload(f"{what} could not be decoded (a truncated or damaged {image.format} file)", what) from None
    return image


def repaint_mask(mask: Image.Image) -> Image.Image:
    """The mask as diffusers takes it (L, white = repaint): alpha 0 -> white when it has alpha, else its grey."""
    if "A" in mask.getbands() or "transparency" in mask.info:
        alpha = mask.convert("RGBA").getchannel("A")
        return alpha.point(lambda value: 255 if value == 0 else 0)
    return mask.convert("L")


def edit_input(source: EditSource, size: tuple[int, int], strength: float) -> EditInput:
    """The image (and mask) at the request's (width, height), ready for the pipeline."""
    image, mask = source.image, source.mask
    rgb = image.convert("RGB")
    if rgb.size != size:
        rgb = rgb.resize(size, Image.Resampling.LANCZOS)
    prepared_mask = None
    if mask is not None:
        prepared_mask = repaint_mask(mask)
        if prepared_mask.size != size:
            prepared_mask = prepared_mask.resize(size, Image.Resampling.NEAREST)
    return EditInput(image=rgb, mask=prepared_mask, strength=strength)


@dataclass(frozen=True, eq=False)
class EditSource:
    """An edit as uploaded: the decoded image, its mask (same size) or None, and the strength asked (None: the
    pipeline's default)."""

    image: Image.Image
    mask: Image.Image | None
    strength: float | None


def edit_source(image: Image.Image, mask: Image.Image | None, strength: float | None) -> EditSource:
    """Pair an image with its mask; BadUpload if the mask's size is not the image's."""
    if mask is not None and mask.size != image.size:
        raise BadUpload(
            f"mask is {mask.size[0]}x{mask.size[1]} pixels and image {image.size[0]}x{image.size[1]}; "
            "they must be the same size",
            "mask",
        )
    return EditSource(image, mask, strength)


def edit_from_body(body: dict[str, Any], limits: UploadLimits) -> tuple[dict[str, Any], EditSource | None]:
    """Split a JSON body (/v1/generate, a job) into its text-to-image fields and its edit: `init_image` and
    `mask_image` as base64, `strength`; BadUpload for a bad image, or a mask or strength without an image."""
    fields = dict(body)
    init_image, mask_image, strength = (fields.pop(name, None) for name in ("init_image", "mask_image", "strength"))
    if init_image is None:
        if mask_image is not None or strength is not None:
            raise BadUpload("mask_image and strength apply to an edit: send init_image with them", "init_image")
        return fields, None
    image = open_image(decode_base64(init_image, "init_image"), "init_image", limits)
    mask = None
    if mask_image is not None:
        mask = open_image(decode_base64(mask_image, "mask_image"), "mask_image", limits)
    return fields, edit_source(image, mask, strength)
