"""Schemathesis hooks for the image service's schema (SCHEMATHESIS_HOOKS=tests.support.schemathesis_hooks).

An edit's image fields are strings (base64) or files in the schema, and no JSON Schema can say "a PNG": the
service decodes them and refuses what is not an image with a 4xx, rightly. So wherever a generated body holds such a
field as a schema-valid string or file, a real small PNG takes its place, and the schema's positive cases stay ones
the service can accept; fields of another type (the negative cases) are left as generated."""

from __future__ import annotations

import base64
import io
from typing import Any

import schemathesis
from PIL import Image

BASE64_FIELDS = ("init_image", "mask_image")  # /v1/generate and /v1/jobs (JSON)
FILE_FIELDS = ("image", "mask")  # /v1/images/edits (multipart)


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 120, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


PNG = _png()
PNG_BASE64 = base64.b64encode(PNG).decode()


@schemathesis.hook
def map_body(context: schemathesis.HookContext, body: Any) -> Any:
    """Put a real PNG where the body has an image field of the schema's type."""
    if not isinstance(body, dict):
        return body
    mapped = dict(body)
    for name in BASE64_FIELDS:
        if isinstance(mapped.get(name), str):
            mapped[name] = PNG_BASE64
    for name in FILE_FIELDS:
        if isinstance(mapped.get(name), bytes | str):
            mapped[name] = PNG
    return mapped
