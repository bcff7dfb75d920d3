"""Request and response models; the request's bounds come from the settings, so /docs states them."""

from __future__ import annotations

import sys
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from app.api.lora_fields import loras_field
from app.params import MAX_SEED
from app.settings import Settings


def _integral_float_as_int(value: Any) -> Any:
    """JSON Schema counts 6.0 as an integer, so clients that write integers as floats (JavaScript,
    schemathesis) send it; 6.5, NaN, strings and booleans stay as they are and fail strict validation."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_int(**bounds: Any) -> Any:
    """An optional integer field type with `bounds` (ge, le, multiple_of) that also takes 6.0, as the
    JSON Schema it publishes promises. The bounds come before the validator: after it, pydantic would
    write them into the schema as "ge"/"le" instead of "minimum"/"maximum"."""
    return Annotated[int, Field(**bounds), BeforeValidator(_integral_float_as_int)] | None


def _non_blank_pattern() -> str:
    """A JSON Schema pattern (ECMA-262 and Python alike) that matches a string with at least one character
    Python's str.strip() keeps: the prompt check in app/params.py, stated in the schema. Spelt out as
    ranges because ECMA-262's \\s is not Python's (it lacks U+001C..U+001F and U+0085, adds U+FEFF)."""
    spaces = [code for code in range(sys.maxunicode + 1) if chr(code).isspace()]
    ranges: list[tuple[int, int]] = []
    for code in spaces:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    parts = [f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges]
    return "[^" + "".join(parts) + "]"


NON_BLANK = _non_blank_pattern()


SIZE_DESCRIPTION = (
    "pixels; default: the model's native size; the family's grid applies within these bounds "
    "(multiple of 16 for Flux; /v1/info `family.size_bounds`)"
)


def prompt_field(settings: Settings) -> tuple[Any, Any]:
    """The prompt, as /v1/generate and /v1/images/generations take it: not blank, at most MAX_PROMPT_CHARS."""
    return (
        str,
        Field(
            min_length=1,
            max_length=settings.max_prompt_chars,
            description="what to draw (not only spaces)",
            # Documents app/params.py's check, which answers it with its own readable message.
            json_schema_extra={"pattern": NON_BLANK},
        ),
    )


def steps_field(settings: Settings, description: str) -> tuple[Any, Any]:
    """Denoising steps, 1 to MAX_STEPS, optional."""
    return json_int(ge=1, le=settings.max_steps), Field(None, description=description)


def guidance_field(settings: Settings, description: str) -> tuple[Any, Any]:
    """Classifier-free guidance, 0 to MAX_GUIDANCE_SCALE, finite, optional."""
    return (
        float | None,
        Field(None, ge=0.0, le=settings.max_guidance_scale, allow_inf_nan=False, description=description),
    )


def strength_field(description: str) -> tuple[Any, Any]:
    """An edit's strength: above 0, at most 1, finite, optional (the pipeline's default)."""
    return float | None, Field(None, gt=0.0, le=1.0, allow_inf_nan=False, description=description)


STRENGTH_DESCRIPTION = (
    "with an image to edit: how far the result may go from it, above 0 to 1 (default: the family's edit "
    "pipeline's, docs/api.md); steps x strength must be at least 1"
)


def edit_fields(settings: Settings) -> dict[str, tuple[Any, Any]]:
    """/v1/generate's (and the jobs') edit fields: the image and mask as base64, the strength."""
    base64_limit = -(-settings.max_upload_bytes // 3) * 4 + len("data:image/webp;base64,")
    image = "PNG, JPEG or WebP as base64 (a data: URL too), at most MAX_UPLOAD_BYTES and MAX_UPLOAD_PIXELS"
    return {
        "init_image": (
            str | None,
            Field(None, max_length=base64_limit, description=f"an image to edit: {image}; the size defaults to its"),
        ),
        "mask_image": (
            str | None,
            Field(
                None,
                max_length=base64_limit,
                description=f"with init_image: where to repaint (inpainting), {image}, the image's size; with alpha, "
                "its fully transparent pixels are repainted (OpenAI's convention), without, its white ones",
            ),
        ),
        "strength": strength_field(STRENGTH_DESCRIPTION),
    }


def make_generate_request(settings: Settings) -> type[BaseModel]:
    """The POST /v1/generate body model with this deployment's limits.

    Strict types: "10" is not a number of steps and true is not a seed; unknown fields are rejected
    so a misspelt option is a 422 instead of being silently ignored.
    """
    size = {"ge": settings.min_size, "le": settings.max_size, "multiple_of": 8}
    fields: dict[str, Any] = {
        "prompt": prompt_field(settings),
        "negative_prompt": (
            str | None,
            Field(
                None,
                max_length=settings.max_prompt_chars,
                description="what to avoid (refused for a family it does not act on, such as FLUX.1-schnell)",
            ),
        ),
        "steps": steps_field(settings, "denoising steps (default: the model family's, see /v1/info `family`)"),
        "guidance_scale": guidance_field(
            settings,
            "classifier-free guidance (default: the model family's); refused for a guidance-distilled family such "
            "as FLUX.1-schnell",
        ),
        "width": (json_int(**size), Field(None, description=SIZE_DESCRIPTION)),
        "height": (json_int(**size), Field(None, description=SIZE_DESCRIPTION)),
        "seed": (json_int(ge=0, le=MAX_SEED), Field(None, description="same seed, same image; default random")),
        "loras": loras_field(settings),
        **edit_fields(settings),
    }
    return create_model(
        "GenerateRequest",
        __config__=ConfigDict(strict=True, extra="forbid", json_schema_extra={"example": {"prompt": "a red fox"}}),
        **fields,
    )


class GenerateJSONResponse(BaseModel):
    """The image as base64 PNG, for clients that send `Accept: application/json`."""

    image_base64: str
    seed: int
    width: int
    height: int
    backend: str
    latency_ms: float
    batch_size: int


class ErrorDetail(BaseModel):
    """One invalid field of a 422: which field, and what is wrong with it."""

    field: str = Field(description='the field\'s name ("body" for the body as a whole)')
    message: str


class ErrorResponse(BaseModel):
    """Every error body: a readable message, on a 422 each bad field, and on a 500 an id for the log line."""

    error: str
    detail: list[ErrorDetail] | None = None
    error_id: str | None = None
