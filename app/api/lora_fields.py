"""The `loras` request field, shared by /v1/generate, the jobs API and OpenAI's Images routes (an extra body field
there), so that every route states and checks it alike. The bounds come from the settings; which adapters exist
is checked when the request is resolved (app/params.py), against LORA_DIR."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.settings import Settings
from common.lora_keys import DEFAULT_SCALE, NAME_PATTERN

LORAS_DESCRIPTION = (
    "LoRA adapters to apply, by name (GET /v1/images/adapters lists them) with a scale each (default 1; 0 is the "
    "image without the adapter)"
)


def lora_model(settings: Settings) -> type[BaseModel]:
    """One adapter of a request: its name and scale, within -MAX_LORA_SCALE..MAX_LORA_SCALE."""
    bound = settings.max_lora_scale
    return create_model(
        "LoraAdapter",
        __config__=ConfigDict(strict=True, extra="forbid"),
        name=(str, Field(min_length=1, max_length=64, pattern=NAME_PATTERN, description="the adapter's name")),
        scale=(
            float,
            Field(
                DEFAULT_SCALE,
                ge=-bound,
                le=bound,
                allow_inf_nan=False,
                description=f"how strongly the adapter acts, -{bound:g} to {bound:g}",
            ),
        ),
    )


def loras_field(settings: Settings) -> tuple[Any, Any]:
    """The optional `loras` list: at most MAX_LORAS adapters (none without LORA_DIR)."""
    item = lora_model(settings)
    item_schema = item.model_json_schema()
    # The list's maximum in the schema: none without LORA_DIR, where every name is refused as unknown.
    most = settings.max_loras if settings.lora_dir is not None else 0

    def schema(field_schema: dict[str, Any]) -> None:
        # The item's schema inline, not a $ref: /v1/images/generations publishes its body schema as a whole
        # (openapi_extra), where a reference to the model's $defs would not resolve.
        for branch in field_schema.get("anyOf", []):
            if branch.get("type") == "array":
                branch.update(items=item_schema, maxItems=most)

    return (
        list[item] | None,  # type: ignore[valid-type]
        Field(
            None,
            max_length=settings.max_loras,
            description=f"{LORAS_DESCRIPTION}; at most {most}",
            json_schema_extra=schema,
        ),
    )
