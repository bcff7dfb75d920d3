"""Turn a request's optional fields into complete GenerationParams (shared by the API and the UI)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from app.backends.base import IMAGE_TO_IMAGE, INPAINT, GenerationParams, LoraRefused, UnsupportedRequest
from app.edit_inputs import EditSource, edit_from_body, edit_input, upload_limits
from app.loras import lora_problems
from app.service import GenerationService
from common.lora_keys import LoraRef, lora_set

MAX_SEED = 2**32 - 1


def resolve_params(
    service: GenerationService,
    *,
    prompt: str,
    negative_prompt: str | None = None,
    steps: int | None = None,
    guidance_scale: float | None = None,
    width: int | None = None,
    height: int | None = None,
    seed: int | None = None,
    loras: Iterable[LoraRef | Mapping[str, Any]] | None = None,
    edit: EditSource | None = None,
) -> GenerationParams:
    """Fill defaults from the settings and the model's family, check the bounds; UnsupportedRequest if out of them.

    A guidance scale or a negative prompt sent to a family they do not act on is refused rather than
    silently dropped: the caller would otherwise believe it had been applied. Adapters (`loras`) are checked
    against LORA_DIR and the limits; their problems alone raise LoraRefused, so a route can name the field. An
    edit's size defaults to its image's.
    """
    settings = service.settings
    family = service.family
    default_width, default_height = service.default_size if edit is None else edit.image.size
    problems: list[tuple[str, str]] = []  # (field, message), the 422's detail
    if guidance_scale is not None and not family.guidance:
        problems.append(
            ("guidance_scale", f"guidance_scale does not apply to {family.title} (guidance-distilled); leave it out")
        )
    if negative_prompt and not family.negative_prompt:
        problems.append(("negative_prompt", f"negative_prompt does not apply to {family.title}; leave it out"))
    params = GenerationParams(
        prompt=prompt,
        negative_prompt=negative_prompt or "",
        steps=service.default_steps if steps is None else steps,
        guidance_scale=service.default_guidance_scale if guidance_scale is None else guidance_scale,
        width=default_width if width is None else width,
        height=default_height if height is None else height,
        seed=secrets.randbelow(MAX_SEED + 1) if seed is None else seed,
        loras=lora_set(loras),
    )
    if not params.prompt.strip():
        problems.append(("prompt", "prompt must not be empty"))
    for name, text in (("prompt", params.prompt), ("negative_prompt", params.negative_prompt)):
        if len(text) > settings.max_prompt_chars:
            problems.append((name, f"{name} is {len(text)} characters; the limit is {settings.max_prompt_chars}"))
    if not 1 <= params.steps <= settings.max_steps:
        problems.append(("steps", f"steps must be between 1 and {settings.max_steps}"))
    if params.guidance_scale is not None and not 0.0 <= params.guidance_scale <= settings.max_guidance_scale:
        problems.append(("guidance_scale", f"guidance_scale must be between 0 and {settings.max_guidance_scale}"))
    problems += service.size_bounds.side_problems(params.width, params.height, family.title)
    if not 0 <= params.seed <= MAX_SEED:
        problems.append(("seed", f"seed must be between 0 and {MAX_SEED}"))
    if problems:
        raise UnsupportedRequest(*problems)
    if params.loras:
        refused = lora_problems(
            params.loras,
            service.adapters(),
            max_loras=settings.max_loras,
            max_scale=settings.max_lora_scale,
        )
        if refused:
            raise LoraRefused("; ".join(refused))
    if edit is not None:
        params = with_edit(service, params, edit)
    if service.backend is not None:
        service.backend.check(params)
    return params


def resolve_body(service: GenerationService, body: dict[str, Any]) -> GenerationParams:
    """resolve_params for a /v1/generate or jobs body, whose edit comes as base64 `init_image` and `mask_image`
    with a `strength` (decoded here, within MAX_UPLOAD_BYTES and MAX_UPLOAD_PIXELS: call it off the event loop)."""
    fields, edit = edit_from_body(body, upload_limits(service.settings))
    return resolve_params(service, **fields, edit=edit)


def with_edit(service: GenerationService, params: GenerationParams, source: EditSource) -> GenerationParams:
    """`params` as an edit of `source`: the strength filled in (the pipeline's default), checked, and the image
    (and mask) brought to the request's size; UnsupportedRequest where the backend runs no such edit."""
    backend = service.backend
    if backend is None:
        # Nothing runs before the model loads (the request gets a 503 next; a job is resolved again when it runs).
        return params
    mode = INPAINT if source.mask is not None else IMAGE_TO_IMAGE
    if mode not in backend.edit_modes:
        # Neuron serves no edit (a GPU or CPU pool does); elsewhere the family has no such pipeline in diffusers.
        where = (
            "send them to a GPU or CPU deployment"
            if backend.name == "neuron"
            else f"diffusers has no {mode} pipeline for {service.family.title} that starts from an image"
        )
        raise UnsupportedRequest(
            (
                "init_image",
                f"{mode} edits are not served by the {backend.name} backend of {service.family.title}: "
                f"{where} (docs/serving.md)",
            )
        )
    strength = backend.default_strength(mode) if source.strength is None else source.strength
    if not 0.0 < strength <= 1.0:
        raise UnsupportedRequest(("strength", "strength must be above 0 and at most 1"))
    if int(params.steps * strength) < 1:
        # diffusers runs int(steps x strength) of the steps: none would return the image unchanged or fail.
        raise UnsupportedRequest(
            (
                "strength",
                f"steps x strength is {params.steps * strength:g}; it must be at least 1 (more steps or more strength)",
            )
        )
    return dataclasses.replace(params, edit=edit_input(source, (params.width, params.height), strength))
