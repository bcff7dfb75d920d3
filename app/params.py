"""Turn a request's optional fields into complete GenerationParams (shared by the API and the UI)."""

from __future__ import annotations

import secrets

from app.backends.base import GenerationParams, UnsupportedRequest
from app.service import GenerationService

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
) -> GenerationParams:
    """Fill defaults from the settings and the model, check the bounds; UnsupportedRequest if out of them."""
    settings = service.settings
    default_width, default_height = service.default_size
    params = GenerationParams(
        prompt=prompt,
        negative_prompt=negative_prompt or "",
        steps=settings.default_steps if steps is None else steps,
        guidance_scale=settings.default_guidance_scale if guidance_scale is None else guidance_scale,
        width=default_width if width is None else width,
        height=default_height if height is None else height,
        seed=secrets.randbelow(MAX_SEED + 1) if seed is None else seed,
    )
    problems = []
    if not params.prompt.strip():
        problems.append("prompt must not be empty")
    for name, text in (("prompt", params.prompt), ("negative_prompt", params.negative_prompt)):
        if len(text) > settings.max_prompt_chars:
            problems.append(f"{name} is {len(text)} characters; the limit is {settings.max_prompt_chars}")
    if not 1 <= params.steps <= settings.max_steps:
        problems.append(f"steps must be between 1 and {settings.max_steps}")
    if not 0.0 <= params.guidance_scale <= settings.max_guidance_scale:
        problems.append(f"guidance_scale must be between 0 and {settings.max_guidance_scale}")
    for name, value in (("width", params.width), ("height", params.height)):
        if not settings.min_size <= value <= settings.max_size or value % 8:
            problems.append(f"{name} must be a multiple of 8 between {settings.min_size} and {settings.max_size}")
    if not 0 <= params.seed <= MAX_SEED:
        problems.append(f"seed must be between 0 and {MAX_SEED}")
    if problems:
        raise UnsupportedRequest("; ".join(problems))
    if service.backend is not None:
        service.backend.check(params)
    return params
