"""The Gradio UI at /: a prompt, a few options, a progress bar over the denoising steps, the image.

It calls the same GenerationService as the API, so UI users queue in the same bounded queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import gradio as gr
from PIL.Image import Image

from app.backends.base import UnsupportedRequest
from app.batching import DeadlineExceeded, QueueFull
from app.logs import log_failure
from app.params import resolve_params
from app.service import GenerationService, NotReady

log = logging.getLogger(__name__)

DEMO_NOTICE = (
    "**Demo model loaded**: `builtin:tiny` is a tiny Stable Diffusion with *random weights*, built on this "
    "machine with no download. It shows that the whole service works; its images are abstract colour "
    "fields, not pictures. Set `MODEL_ID` to real weights for real images."
)


async def _generate_with_progress(
    service: GenerationService, fields: dict[str, Any], progress: gr.Progress
) -> tuple[Image, str]:
    """Queue a request, relay each denoising step to the progress bar, return the image and a caption."""
    try:
        params = resolve_params(service, **fields)
    except UnsupportedRequest as exc:
        raise gr.Error(str(exc)) from None
    steps: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    started = time.perf_counter()
    status, images = 500, 0
    progress((0, params.steps), desc="waiting in the queue", unit="steps")
    task = asyncio.create_task(service.generate(params, on_step=lambda done, total: steps.put_nowait((done, total))))
    try:
        while not task.done():
            next_step = asyncio.ensure_future(steps.get())
            await asyncio.wait({task, next_step}, return_when=asyncio.FIRST_COMPLETED)
            if next_step.done():
                progress(next_step.result(), desc="denoising", unit="steps")
            else:
                next_step.cancel()
        result = task.result()
        status, images = 200, 1
    except NotReady as exc:
        status = 503
        raise gr.Error(f"{exc}; try again in a moment") from None
    except QueueFull:
        status = 429
        raise gr.Error("the service is busy (queue full); try again in a moment") from None
    except DeadlineExceeded:
        status = 504
        raise gr.Error("the image took too long; try fewer steps or a smaller size") from None
    except Exception as exc:
        error_id = log_failure(log, "generation failed", exc)
        raise gr.Error(f"internal error while generating (error id {error_id})") from None
    finally:
        task.cancel()  # a no-op when done; stops waiting if the browser left
        latency_ms = (time.perf_counter() - started) * 1000.0
        service.record(status, latency_ms, images)
        log.info(
            "request",
            extra={
                "event": "request",
                "path": "ui:generate",
                "status": status,
                "latency_ms": round(latency_ms, 1),
                "backend": service.backend.name if service.backend else None,
                "batch_size": task.result().batch_size if status == 200 else None,
            },
        )
    latency = latency_ms / 1000.0
    caption = (
        f"seed {params.seed} · {params.width}x{params.height} · {params.steps} steps · "
        f"{latency:.2f} s on {service.backend.name if service.backend else '?'} (batch of {result.batch_size})"
    )
    return result.image, caption


def build_ui(service: GenerationService) -> gr.Blocks:
    """The Blocks app; sizes default to the model's native size once it is loaded."""
    settings = service.settings
    with gr.Blocks(title="Stable Diffusion") as ui:
        gr.Markdown("# Stable Diffusion\nType a prompt and press **Generate**.")
        if service.demo_model:
            gr.Markdown(DEMO_NOTICE, elem_id="demo-notice")
        with gr.Row():
            with gr.Column():
                prompt = gr.Textbox(label="Prompt", max_length=settings.max_prompt_chars, elem_id="prompt")
                negative = gr.Textbox(label="Negative prompt", max_length=settings.max_prompt_chars)
                with gr.Accordion("Options", open=False):
                    steps = gr.Slider(1, settings.max_steps, value=settings.default_steps, step=1, label="Steps")
                    guidance = gr.Slider(
                        0.0, settings.max_guidance_scale, value=settings.default_guidance_scale, label="Guidance"
                    )
                    size = {"minimum": settings.min_size, "maximum": settings.max_size, "step": 8}
                    width = gr.Slider(**size, value=settings.default_width or settings.min_size, label="Width")
                    height = gr.Slider(**size, value=settings.default_height or settings.min_size, label="Height")
                    seed = gr.Number(label="Seed (empty: random)", value=None, precision=0, minimum=0)
                button = gr.Button("Generate", variant="primary", elem_id="generate")
            with gr.Column():
                image = gr.Image(
                    label="Image", type="pil", format="png", elem_id="result", interactive=False, height=420
                )
                caption = gr.Markdown(elem_id="caption")

        async def generate(
            prompt_text: str,
            negative_text: str,
            steps_value: float,
            guidance_value: float,
            width_value: float,
            height_value: float,
            seed_value: float | None,
            progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's documented way to get a tracker
        ) -> tuple[Image, str]:
            fields = {
                "prompt": prompt_text,
                "negative_prompt": negative_text,
                "steps": int(steps_value),
                "guidance_scale": float(guidance_value),
                "width": int(width_value),
                "height": int(height_value),
                "seed": None if seed_value is None else int(seed_value),
            }
            return await _generate_with_progress(service, fields, progress)

        def native_sizes() -> tuple[Any, Any]:
            # Runs on page load: once the model is known, default the sliders to its native size.
            if service.backend is None:
                return gr.update(), gr.update()
            default_width, default_height = service.default_size
            return gr.update(value=default_width), gr.update(value=default_height)

        ui.load(native_sizes, outputs=[width, height], queue=False)
        inputs = [prompt, negative, steps, guidance, width, height, seed]
        # Our own batcher bounds the work; let Gradio hand requests to it concurrently so they can batch.
        event = {"concurrency_limit": settings.queue_size + settings.max_batch_size}
        button.click(generate, inputs, [image, caption], **event)
        prompt.submit(generate, inputs, [image, caption], **event)
    return ui
