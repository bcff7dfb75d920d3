"""Request and response models; the request's bounds come from the settings, so /docs states them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.params import MAX_SEED
from app.settings import Settings


def make_generate_request(settings: Settings) -> type[BaseModel]:
    """The POST /v1/generate body model with this deployment's limits.

    Strict types: "10" is not a number of steps and true is not a seed; unknown fields are rejected
    so a misspelt option is a 422 instead of being silently ignored.
    """
    size = {"ge": settings.min_size, "le": settings.max_size, "multiple_of": 8}
    fields: dict[str, Any] = {
        "prompt": (str, Field(min_length=1, max_length=settings.max_prompt_chars, description="what to draw")),
        "negative_prompt": (
            str | None,
            Field(None, max_length=settings.max_prompt_chars, description="what to avoid"),
        ),
        "steps": (
            int | None,
            Field(None, ge=1, le=settings.max_steps, description=f"denoising steps (default {settings.default_steps})"),
        ),
        "guidance_scale": (
            float | None,
            Field(
                None,
                ge=0.0,
                le=settings.max_guidance_scale,
                allow_inf_nan=False,
                description=f"classifier-free guidance (default {settings.default_guidance_scale})",
            ),
        ),
        "width": (int | None, Field(None, **size, description="pixels; default: the model's native size")),
        "height": (int | None, Field(None, **size, description="pixels; default: the model's native size")),
        "seed": (int | None, Field(None, ge=0, le=MAX_SEED, description="same seed, same image; default random")),
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


class ErrorResponse(BaseModel):
    """Every error body: a readable message, and for 500s an id to find the log line."""

    error: str
    detail: list[dict[str, Any]] | None = None
    error_id: str | None = None
