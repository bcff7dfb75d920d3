"""The body and answer of POST /v1/images/generations, OpenAI's Images API as the openai SDK 3.51.0 sends it.

Fields and values are read from the SDK's `types/image_generate_params.py`, `types/images_response.py` and
`types/image.py` (openai 3.51.0 in .venv). What maps onto this service is accepted; what the service cannot
honour (another output format, transparency, streaming, GIF and SVG output) is refused with the reason, never
ignored. Beside OpenAI's fields the body takes this service's own knobs (`seed`, `negative_prompt`, `steps`,
`guidance_scale`, `loras`, the SDK's `extra_body`), with /v1/generate's bounds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.api.lora_fields import loras_field
from app.api.schemas import guidance_field, json_int, prompt_field, steps_field
from app.model_store.source import public_model_name
from app.params import MAX_SEED
from app.settings import Settings

# OpenAI documents n as "between 1 and 10".
MAX_IMAGES_PER_REQUEST: Final = 10
SIZE_AUTO: Final = "auto"
SIZE_PATTERN: Final = re.compile(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})")
OUTPUT_FORMAT: Final = "png"
BACKGROUND: Final = "opaque"


@dataclass(frozen=True)
class Option:
    """An OpenAI field this service answers only some values of: those it takes, and why not the others."""

    accepted: tuple[Any, ...]
    reason: str

    def takes(self, value: Any) -> bool:
        """True for null and the accepted values (of the same JSON type: 0 is not false)."""
        return value is None or any(type(value) is type(a) and value == a for a in self.accepted)

    def json_schema(self) -> dict[str, Any]:
        """The values it takes, and null, as JSON Schema: an enum of strings, else one `const` each. A boolean enum
        would be as valid, but openapi-python-client 0.29.1 takes enums of strings or integers only (its
        parser/properties/enum_property.py) and leaves the whole operation out of the client it generates."""
        if all(type(value) is str for value in self.accepted):
            return {"enum": [*self.accepted, None]}
        return {"anyOf": [*({"const": value} for value in self.accepted), {"type": "null"}]}


OPTIONS: Final = {
    "response_format": Option(("b64_json", "url"), "the image comes as base64 (b64_json) or as a link (url)"),
    "quality": Option(("auto",), "this service has one quality; the `steps` field sets the denoising steps instead"),
    "style": Option((), "describe the style in the prompt"),
    "background": Option(("auto", "opaque"), "the images are opaque PNGs"),
    "output_format": Option((OUTPUT_FORMAT,), "the images are PNGs"),
    "output_compression": Option((), "it applies to jpeg and webp output; the images are PNGs"),
    # The service does no content moderation, so the lenient setting asks for nothing it does not do.
    "moderation": Option(("auto", "low"), "it is one of auto or low"),
    "stream": Option((False,), "the answer comes whole; streaming is not offered"),
    "partial_images": Option((), "partial images come only with streaming, which is not offered"),
    "complexity": Option((), "the model has no planning stage to tune"),
    "frame_count": Option((), "GIF output is not offered"),
    "frame_duration_ms": Option((), "GIF output is not offered"),
    "svg": Option((), "SVG output is not offered"),
}


def size_pattern(settings: Settings) -> str:
    """The JSON Schema pattern of the sizes within this deployment's bounds (each side a multiple of 8 from
    MIN_SIZE to MAX_SIZE, as app/params.py checks), so that every size the schema allows is one the service
    takes; at most 512 alternatives (MAX_SIZE <= 4096)."""
    sides = "|".join(str(side) for side in range(-(-settings.min_size // 8) * 8, settings.max_size + 1, 8))
    return f"^({SIZE_AUTO}|(?:{sides})x(?:{sides}))$"


def make_images_request(settings: Settings) -> type[BaseModel]:
    """The POST /v1/images/generations body model with this deployment's limits.

    Unknown fields are refused (OpenAI answers "Unknown parameter" too); the options in OPTIONS take any
    JSON here and are checked against their accepted values by the route, which names the reason.
    """
    return create_model(
        "ImagesGenerationRequest",
        __config__=ConfigDict(strict=True, extra="forbid", json_schema_extra={"example": {"prompt": "a red fox"}}),
        **images_request_fields(settings),
    )


def images_request_fields(settings: Settings) -> dict[str, Any]:
    """The fields OpenAI's generations and edits share (prompt, model, n, size, the options), with this
    service's own knobs, as pydantic field definitions."""
    fields: dict[str, Any] = {
        "prompt": prompt_field(settings),
        "model": (
            str | None,
            Field(
                None,
                max_length=256,
                description="omit it, or the model GET /v1/info names",
                json_schema_extra={"enum": [public_model_name(settings.model_id), None]},
            ),
        ),
        "n": (
            json_int(ge=1, le=min(MAX_IMAGES_PER_REQUEST, settings.queue_size)),
            Field(
                None,
                description=f"images to generate (default 1, at most {MAX_IMAGES_PER_REQUEST} and QUEUE_SIZE); "
                "they queue together and share a batch",
            ),
        ),
        "size": (
            str | None,
            Field(
                None,
                max_length=16,
                description="WIDTHxHEIGHT in pixels, or auto (the model's native size)",
                json_schema_extra={"pattern": size_pattern(settings)},
            ),
        ),
        "user": (str | None, Field(None, max_length=256, description="accepted for compatibility; not stored")),
        "safety_identifier": (
            str | None,
            Field(None, max_length=256, description="accepted for compatibility; not stored"),
        ),
        "negative_prompt": (
            str | None,
            Field(None, max_length=settings.max_prompt_chars, description="this service's: what to avoid"),
        ),
        "steps": steps_field(settings, f"this service's: denoising steps (default {settings.default_steps})"),
        "guidance_scale": guidance_field(
            settings, f"this service's: classifier-free guidance (default {settings.default_guidance_scale})"
        ),
        "seed": (
            json_int(ge=0, le=MAX_SEED),
            Field(None, description="this service's: the first image's seed; the next ones count up (modulo 2**32)"),
        ),
        "loras": loras_field(settings),
    }
    for name, option in OPTIONS.items():
        accepted = [*option.accepted, None]
        fields[name] = (Any, Field(None, description=f"accepted: {accepted}", json_schema_extra=option.json_schema()))
    return fields


def parse_size(size: str | None) -> tuple[int, int] | None:
    """ "512x768" -> (512, 768); None or "auto" -> None (the model's native size); ValueError otherwise."""
    if size is None or size == SIZE_AUTO:
        return None
    match = SIZE_PATTERN.fullmatch(size)
    if match is None:
        raise ValueError(f"size must be WIDTHxHEIGHT in pixels, such as 512x512, or {SIZE_AUTO}")
    return int(match.group(1)), int(match.group(2))


class ImageData(BaseModel):
    """One generated image: base64 PNG or a link to it."""

    model_config = ConfigDict(extra="forbid")

    b64_json: str | None = None
    url: str | None = Field(None, description="a link that works without a token until it expires")


class ImagesResponse(BaseModel):
    """OpenAI's ImagesResponse. No `usage`: OpenAI counts image tokens, which a diffusion model has none of."""

    created: int = Field(description="Unix time of the answer")
    data: list[ImageData]
    size: str
    output_format: str = OUTPUT_FORMAT
    background: str = BACKGROUND
