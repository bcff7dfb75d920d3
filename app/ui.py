"""The Gradio UI at /: a prompt, a few options, a progress bar over the denoising steps, the image.

It calls the same GenerationService as the API, so UI users queue in the same bounded queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import gradio as gr
from PIL.Image import Image
from pydantic import BaseModel, ValidationError

from app.api.errors import describe_errors
from app.api.schemas import make_generate_request
from app.backends.base import UnsupportedRequest
from app.batching import BatchResult, DeadlineExceeded, QueueFull, ShutdownCut
from app.edit_inputs import EditSource, upload_limits
from app.model_store.source import public_model_name
from app.params import resolve_body, resolve_params
from app.service import GenerationService, NotReady
from app.ui_controls import EDIT, negative_prompt, result, sampling, seed_and_adapters
from app.ui_edits import BoundedBlobStorage, editor_source, fitted_size
from common.http.disconnect import CLIENT_CLOSED_REQUEST
from common.logs import log_failure, new_error_id

log = logging.getLogger(__name__)

CLIENT_POLL_S = 0.5  # how often a waiting UI request checks whether its browser is still there

DEMO_NOTICE = (
    "**Demo model loaded**: `{model}` is a tiny {family} with *random weights*, built on this "
    "machine with no download. It shows that the whole service works; its images are abstract colour "
    "fields, not pictures. Set `MODEL_ID` to real weights for real images."
)

# Canvases the Edit tab's editor may keep in memory until an edit uses them (each within the upload bounds): a
# handful of people editing at once on one pod.
MAX_PENDING_CANVASES = 16


BUSY_MESSAGE = "The service is busy (its queue is full); try again in a moment."
LEFT_MESSAGE = "The request was cancelled because the page was closed."


def _ui_error(message: str) -> gr.Error:
    """A message for the user; Gradio prints no traceback for it (logs stay one JSON line each)."""
    return gr.Error(message, print_exception=False)


def _as_api_number(value: Any) -> Any:
    """Sliders and number boxes send floats: 4.0 becomes the API's 4; 2.7 or NaN stay, and fail validation."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def picked_loras(names: Any, scale: Any) -> Any:
    """The page's adapter picker as the API's `loras` (None when none is picked); anything but a list of names is
    passed on for the API's request model to refuse with its message."""
    if not names:
        return None
    if not isinstance(names, list):
        return names
    return [{"name": name, "scale": 1.0 if scale is None else scale} for name in names]


def ui_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The UI's raw values as the API's JSON body: numbers as the API takes them, blanks left out, the
    seed box's text as a number."""
    fields = {name: _as_api_number(value) for name, value in values.items()}
    if fields.get("negative_prompt") in ("", None):
        fields.pop("negative_prompt", None)
    seed = fields.get("seed")
    if isinstance(seed, str):
        # The page's seed box is text: blank is random, digits are a seed, anything else fails validation.
        seed = seed.strip()
        fields["seed"] = int(seed) if seed.isascii() and seed.isdigit() else seed or None
    if fields.get("seed") is None:
        fields.pop("seed", None)
    return fields


async def _generate_with_progress(
    service: GenerationService,
    fields: dict[str, Any],
    progress: gr.Progress,
    client_gone: Callable[[], bool] = lambda: False,
    request_model: type[BaseModel] | None = None,
    edit: Callable[[], EditSource] | None = None,
) -> tuple[Image, str]:
    """Validate like the API, queue a request, relay each denoising step to the progress bar.

    `edit` reads the Edit tab's upload (off the event loop): the request is then an edit of it, its size the
    picture's fitted to the model unless one is given. Every outcome is counted in the metrics and logged as one
    `ui:generate` (or `ui:edit`) line with the HTTP status the API would have given (499 when the browser left);
    failures carry an error id.
    """
    started = time.perf_counter()
    status, images, batch_size, error_id = 500, 0, None, None
    task: asyncio.Task[BatchResult] | None = None
    try:
        try:
            if request_model is not None:
                fields = request_model.model_validate(fields).model_dump()
            if edit is None:
                params = resolve_body(service, fields)  # the Generate tab sends no init image: nothing to decode
            else:
                source = await asyncio.to_thread(edit)
                width, height = fitted_size(source.image.size, service.size_bounds)
                fields = {"width": width, "height": height, **{k: v for k, v in fields.items() if v is not None}}
                params = await asyncio.to_thread(lambda: resolve_params(service, **fields, edit=source))
        except ValidationError as exc:
            status = 422
            raise _ui_error(describe_errors(exc.errors())[0]) from None
        except UnsupportedRequest as exc:
            status = 422
            raise _ui_error(str(exc)) from None
        steps: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        progress((0, params.steps), desc="waiting in the queue", unit="steps")
        task = asyncio.create_task(
            service.generate(params, on_step=lambda done, total: steps.put_nowait((done, total)))
        )
        while not task.done():
            next_step = asyncio.ensure_future(steps.get())
            await asyncio.wait({task, next_step}, timeout=CLIENT_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            if next_step.done():
                progress(next_step.result(), desc="denoising", unit="steps")
            else:
                next_step.cancel()
            if not task.done() and client_gone():
                status = CLIENT_CLOSED_REQUEST
                raise _ui_error(LEFT_MESSAGE)
        result = task.result()
        status, images, batch_size = 200, 1, result.batch_size
    except gr.Error:
        raise
    except NotReady as exc:
        status = 503
        raise _ui_error(f"{exc}; try again in a moment") from None
    except QueueFull:
        status = 429
        raise _ui_error(BUSY_MESSAGE) from None
    except ShutdownCut:
        status = 503
        raise _ui_error("The service restarted before the image was ready; try again.") from None
    except DeadlineExceeded:
        status = 504
        raise _ui_error("The image took too long; try fewer steps or a smaller size.") from None
    except asyncio.CancelledError:
        status = CLIENT_CLOSED_REQUEST
        raise
    except Exception as exc:
        error_id = log_failure(log, "generation failed", exc)
        raise _ui_error(f"Internal error while generating (error id {error_id}).") from None
    finally:
        if task is not None:
            task.cancel()  # a no-op when done; takes the request out of the queue if the browser left
        latency_ms = (time.perf_counter() - started) * 1000.0
        service.record(status, latency_ms, images)
        if status >= 400 and status != CLIENT_CLOSED_REQUEST and error_id is None:
            error_id = new_error_id()
        log.info(
            "request",
            extra={
                "event": "request",
                "path": "ui:generate" if edit is None else "ui:edit",
                "status": status,
                "latency_ms": round(latency_ms, 1),
                "backend": service.backend.name if service.backend else None,
                "batch_size": batch_size,
                "error_id": error_id,
            },
        )
    caption = (
        f"seed {params.seed} · {params.width}x{params.height} · {params.steps} steps · "
        f"{latency_ms / 1000.0:.2f} s on {service.backend.name if service.backend else '?'} "
        f"(batch of {result.batch_size})"
    )
    return result.image, caption


def _browser_left(ui: gr.Blocks, request: gr.Request | None) -> bool:
    """True once Gradio has seen the page's event stream close.

    Gradio does not cancel a running event when the browser leaves: its queue marks the session's
    active events `alive = False` (gradio 6.31 `queueing.py`, `Queue.clean_events`, called from the
    SSE route in `routes.py` on `request.is_disconnected()`), which is what this reads.
    """
    session = getattr(request, "session_hash", None)
    queue = getattr(ui, "_queue", None)
    if session is None or queue is None:
        return False
    return any(
        event.session_hash == session and not event.alive for jobs in queue.active_jobs if jobs for event in jobs
    )


LOADING_NOTICE = "**Loading the model**: Generate works once it is ready; this page updates itself."
STATUS_POLL_S = 1.0  # how often a page opened while the model loads asks whether it is ready


def model_status(service: GenerationService) -> str:
    """What the page says about the model: loading, failed (with the error id; locally the reason too), or which
    model is loaded and its family, after the demo notice for the built-in one."""
    if service.load_error_id is not None:
        failed = f"**The model failed to load** (error id {service.load_error_id})"
        if service.settings.loopback_only:
            # Bound to loopback, the reader is this machine's operator: the reason, not only the log line's id.
            reason = " ".join(str(service.load_error).replace("`", "'").split())  # one line of inline code
            return f"{failed}: `{reason}`. Fix it (MODEL_ID, the model files) and restart the service."
        return f"{failed}; the operator must fix it."
    if not service.ready:
        return LOADING_NOTICE
    loaded = (
        f"Model loaded: **{public_model_name(service.settings.model_id)}**. Model family: **{service.family.title}**."
    )
    if service.demo_model:
        return DEMO_NOTICE.format(model=service.settings.model_id, family=service.family.title) + "\n\n" + loaded
    return loaded


def size_label(width: int, height: int) -> str:
    """A size preset as the page shows it, e.g. "896 x 1152 (portrait)"."""
    shape = "square" if width == height else "portrait" if height > width else "landscape"
    return f"{width} x {height} ({shape})"


def family_controls(service: GenerationService) -> dict[str, dict[str, Any]]:
    """gr.update() arguments that fit the page's controls to the model's family.

    Size presets of the family at this model's scale; sliders on the family's grid within its bounds; the
    guidance slider and the negative prompt only where they act on the family.
    """
    family = service.family
    bounds = service.size_bounds
    # Before the model loads the family's reference size stands in; keep it inside the sliders' bounds.
    width, height = (min(max(side, bounds.min_side), bounds.max_side) for side in service.default_size)
    sizes = service.sizes
    guidance = service.default_guidance_scale
    size = {"minimum": bounds.min_side, "maximum": bounds.max_side, "step": bounds.multiple_of}
    return {
        "presets": {
            "choices": [size_label(*s) for s in sizes],
            "value": size_label(width, height) if (width, height) in sizes else None,
            "visible": len(sizes) > 1,
        },
        "width": {**size, "value": width},
        "height": {**size, "value": height},
        "steps": {"value": service.default_steps},
        "guidance": {"visible": family.guidance, **({"value": guidance} if guidance is not None else {})},
        "negative": {"visible": family.negative_prompt},
    }


def build_ui(service: GenerationService) -> gr.Blocks:
    """The Blocks app; sizes default to the model's native size once it is loaded."""
    settings = service.settings
    request_model = make_generate_request(settings)
    # Gradio writes each output image and each upload (the Edit tab's) under GRADIO_TEMP_DIR; delete them after
    # UI_FILE_TTL_S (checked as often: gradio 6.31 route_utils `delete_files_created_by_app` covers the Blocks'
    # `upload_file_set`), so a busy UI cannot fill the pod's /tmp. The browser fetches an image as soon as it is shown.
    ttl = settings.ui_file_ttl_s
    # The family the model source declares (a built-in's, a local folder's): status_update corrects the
    # controls once the model has loaded, for sources that cannot say before (hub ids, s3:// prefixes).
    controls = family_controls(service)
    # The adapters in LORA_DIR when the page was built (GET /v1/images/adapters lists the current ones).
    adapters = sorted(service.adapters())
    with gr.Blocks(title="Image generation", delete_cache=(ttl, ttl)) as ui:
        gr.Markdown("# Image generation\nType a prompt and press **Generate**.")
        status = gr.Markdown(model_status(service), elem_id="model-status")
        with gr.Tabs():
            with gr.Tab("Generate", id="generate-tab"), gr.Row():
                with gr.Column():
                    prompt = gr.Textbox(label="Prompt", max_length=settings.max_prompt_chars, elem_id="prompt")
                    negative = negative_prompt(settings, controls)
                    with gr.Accordion("Options", open=False):
                        steps, guidance = sampling(settings, controls)
                        presets = gr.Radio(label="Size", elem_id="size-presets", **controls["presets"])
                        width = gr.Slider(label="Width", elem_id="width", **controls["width"])
                        height = gr.Slider(label="Height", elem_id="height", **controls["height"])
                        seed, lora_names, lora_scale = seed_and_adapters(settings, adapters)
                    button = gr.Button("Generate", variant="primary", elem_id="generate")
                with gr.Column():
                    image, caption = result("Image")
            with gr.Tab("Edit", id="edit-tab", elem_id="edit-tab"), gr.Row():
                with gr.Column():
                    # Upload only (no webcam or clipboard: a server behind a load balancer); the brush's strokes
                    # are the part repainted, no strokes redraw the whole picture (image to image).
                    editor = gr.ImageMask(
                        label="Image (paint over what to repaint; no paint: the whole image is redrawn)",
                        sources=["upload"],
                        type="pil",
                        layers=False,
                        elem_id="edit-image",
                    )
                    editor.blob_storage = BoundedBlobStorage(MAX_PENDING_CANVASES)
                    edit_prompt = gr.Textbox(
                        label="Edit prompt", max_length=settings.max_prompt_chars, elem_id="edit-prompt"
                    )
                    strength = gr.Slider(
                        0.05,
                        1.0,
                        value=0.8,
                        step=0.05,
                        label="Strength (how far from the image)",
                        elem_id="strength",
                    )
                    with gr.Accordion("Edit settings", open=False):
                        edit_negative = negative_prompt(settings, controls, EDIT)
                        edit_steps, edit_guidance = sampling(settings, controls, EDIT)
                        edit_seed, edit_lora_names, edit_lora_scale = seed_and_adapters(settings, adapters, EDIT)
                    edit_button = gr.Button("Edit", variant="primary", elem_id="edit")
                with gr.Column():
                    edited, edit_caption = result("Edited image", EDIT)
        # gradio_client takes each parameter's default from its input's initial value; the size sliders
        # start at a placeholder, so the public endpoint reads sizes and seed from empty hidden numbers
        # instead (empty: the model's native size, a random seed, as in the API). The page never shows them.
        with gr.Group(visible=False):
            api_guidance = gr.Number(label="Guidance (empty: the model family's default)", value=None)
            api_width = gr.Number(label="Width (empty: the model's native size)", value=None)
            api_height = gr.Number(label="Height (empty: the model's native size)", value=None)
            api_seed = gr.Number(label="Seed (empty: random)", value=None)
            api_trigger = gr.Button("Generate (API)")
        poll = gr.Timer(STATUS_POLL_S, active=False)

        async def generate(
            prompt: Any,
            negative_prompt: Any = None,
            steps: Any = None,
            guidance_scale: Any = None,
            width: Any = None,
            height: Any = None,
            seed: Any = None,
            request: gr.Request | None = None,
            progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's documented way to get a tracker
        ) -> tuple[Image, str]:
            """Generate one image; empty fields take the API's defaults (sizes: the model's native size)."""
            values = {
                "prompt": prompt,
                "negative_prompt": negative_prompt,
                "steps": steps,
                "guidance_scale": guidance_scale,
                "width": width,
                "height": height,
                "seed": seed,
            }
            return await run(values, request, progress)

        async def run(values: dict[str, Any], request: gr.Request | None, progress: gr.Progress) -> tuple[Image, str]:
            # No conversion here (the events skip Gradio's preprocessing): the API's request model judges
            # the raw values, so 2.7 steps or a list as the prompt get the API's readable message.
            return await _generate_with_progress(
                service, ui_fields(values), progress, lambda: _browser_left(ui, request), request_model
            )

        async def generate_page(
            prompt: Any,
            negative_prompt: Any = None,
            steps: Any = None,
            guidance_scale: Any = None,
            width: Any = None,
            height: Any = None,
            seed: Any = None,
            lora_names: Any = None,
            lora_scale: Any = None,
            request: gr.Request | None = None,
            progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's documented way to get a tracker
        ) -> tuple[Image, str]:
            """The page's Generate: a control the family has not (hidden on the page) sends nothing; the adapters
            picked share the one scale."""
            family = service.family
            values = {
                "prompt": prompt,
                "negative_prompt": negative_prompt if family.negative_prompt else None,
                "steps": steps,
                "guidance_scale": guidance_scale if family.guidance else None,
                "width": width,
                "height": height,
                "seed": seed,
                "loras": picked_loras(lora_names, lora_scale),
            }
            return await run(values, request, progress)

        limits = upload_limits(settings)

        async def edit_page(
            editor_value: Any,
            prompt: Any,
            negative_prompt: Any = None,
            steps: Any = None,
            guidance_scale: Any = None,
            seed: Any = None,
            lora_names: Any = None,
            lora_scale: Any = None,
            strength: Any = None,
            request: gr.Request | None = None,
            progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's documented way to get a tracker
        ) -> tuple[Image, str]:
            """The Edit tab: the uploaded picture redrawn (no strokes) or its painted part repainted, through the same
            checks and batcher as POST /v1/images/edits; the size is the picture's, fitted to the model."""
            family = service.family
            values = {
                "prompt": prompt,
                "negative_prompt": negative_prompt if family.negative_prompt else None,
                "steps": steps,
                "guidance_scale": guidance_scale if family.guidance else None,
                "seed": seed,
                "loras": picked_loras(lora_names, lora_scale),
            }

            def read_upload() -> EditSource:
                return editor_source(
                    editor_value,
                    _as_api_number(strength),
                    blob_storage=editor.blob_storage,
                    uploaded=ui.upload_file_set,
                    cache_dir=ui.GRADIO_CACHE,
                    limits=limits,
                )

            return await _generate_with_progress(
                service,
                ui_fields(values),
                progress,
                lambda: _browser_left(ui, request),
                request_model,
                edit=read_upload,
            )

        # Each control fitted to the family, by its family_controls name (one list: the outputs and the updates);
        # the Edit tab's own steps, guidance and negative prompt follow the same updates.
        fitted_controls = {
            "presets": presets,
            "width": width,
            "height": height,
            "steps": steps,
            "guidance": guidance,
            "negative": negative,
        }
        edit_controls = {"steps": edit_steps, "guidance": edit_guidance, "negative": edit_negative}

        def status_update() -> tuple[Any, ...]:
            # On page load, then every STATUS_POLL_S while the model loads: once it is ready the page
            # says what it runs and the controls fit the model's family and native size.
            if not service.ready:
                unchanged = [gr.update() for _ in (*fitted_controls, *edit_controls)]
                return (model_status(service), *unchanged, gr.Timer(active=service.load_error_id is None))
            # Only the controls the loaded model changes: an update re-renders the Options panel, and a value typed
            # there before the page's load event answered (a seed, say) was lost with it.
            fitted = family_controls(service)
            updates = [
                gr.update(**fitted[name]) if fitted[name] != controls[name] else gr.update()
                for name in (*fitted_controls, *edit_controls)
            ]
            return (model_status(service), *updates, gr.Timer(active=False))

        def preset_chosen(label: str | None) -> tuple[Any, Any]:
            # The Radio's labels are the model's sizes; anything else (none chosen) leaves the sliders.
            for size in service.sizes:
                if size_label(*size) == label:
                    return size
            return gr.update(), gr.update()

        # Internal handlers stay out of gradio_client's view_api (api_visibility, gradio 6.31 blocks.py).
        internal = {"queue": False, "api_visibility": "private", "show_progress": "hidden"}
        status_outputs = [status, *fitted_controls.values(), *edit_controls.values(), poll]
        ui.load(status_update, outputs=status_outputs, **internal)
        poll.tick(status_update, outputs=status_outputs, **internal)
        presets.input(preset_chosen, inputs=[presets], outputs=[width, height], **internal)
        outputs = [image, caption]
        # Our batcher is the one bound for UI and API alike: Gradio hands every UI request to it at once
        # (no concurrency limit, so nothing waits in Gradio's own queue), and a full queue is a "busy".
        # preprocess=False: the raw values reach the API's request model (see generate).
        event = {"concurrency_limit": None, "preprocess": False}
        api_inputs = [prompt, negative, steps, api_guidance, api_width, api_height, api_seed]
        api_trigger.click(generate, api_inputs, outputs, api_name="generate", **event)
        page_inputs = [prompt, negative, steps, guidance, width, height, seed, lora_names, lora_scale]
        page_event = {"api_visibility": "private", **event}
        button.click(generate_page, page_inputs, outputs, api_name="page_generate", **page_event)
        prompt.submit(generate_page, page_inputs, outputs, api_name="page_submit", **page_event)
        edit_inputs = [
            editor,
            edit_prompt,
            edit_negative,
            edit_steps,
            edit_guidance,
            edit_seed,
            edit_lora_names,
            edit_lora_scale,
            strength,
        ]
        edit_button.click(edit_page, edit_inputs, [edited, edit_caption], api_name="page_edit", **page_event)
    # No size for Gradio's own queue: our batcher is the one bound (a full one is "busy" on the page).
    # Events do wait in Gradio's queue between joining and its next pass, so a bound there answered a
    # burst of page requests with its own 503 "Queue is full" before our handler saw them; memory is
    # bounded by the connection limits. api_open=False: queued events only through the queue.
    ui.queue(max_size=None, default_concurrency_limit=None, api_open=False)
    return ui
