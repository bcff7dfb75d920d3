"""The Edit tab's image editor value as an EditSource: the picture, and the drawn strokes as the mask.

The page's `gr.ImageMask` (gradio 6.31 components/image_editor.py) sends its value one of two ways: `{"id": ...}`
after the page sent the canvas's PNGs through `accept_blobs` (kept in the component's `blob_storage` until used), or
`{"background": FileData, "layers": [FileData], ...}` naming files sent to `/gradio_api/upload` (what
gradio_client and scripts send). Both arrived through app/api/gradio_uploads.py's check; they are opened here with
the same checks again (bytes, format, pixels) since the event runs without Gradio's preprocessing. A file path is
served only if Gradio took it through its upload route (`upload_file_set`), so a request cannot name another file
on the server. Strokes are repainted: a layer's pixels with any opacity are the mask (white), the rest kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from PIL import Image, ImageChops

from app.edit_inputs import BadUpload, EditSource, UploadLimits, edit_source, open_image
from app.models.families import SizeBounds

# The page sends the editor as it is when Edit is pressed: a picture just chosen may not be on the canvas yet (seen
# under load: the click went out before the editor had read the file).
NO_IMAGE = "upload an image to edit first (one just chosen: press Edit again once it shows in the editor)"


def _file_bytes(file: object, what: str, uploaded: Collection[str], cache_dir: str) -> bytes | None:
    """The bytes of a FileData-like dict that names an uploaded file; None for no file."""
    if file is None:
        return None
    if isinstance(file, (bytes, bytearray)):
        return bytes(file)
    path = file.get("path") if isinstance(file, Mapping) else None
    if not isinstance(path, str) or not path:
        raise BadUpload(f"{what} is not a file uploaded to this page", what)
    # Result links name files relative to the cache (app/ui_files.py); uploads come back either way.
    full = path if path.startswith("/") else str(Path(cache_dir) / path)
    if full not in uploaded:
        raise BadUpload(f"{what} is not a file uploaded to this page (or it expired): upload it again", what)
    try:
        return Path(full).read_bytes()
    except OSError:
        raise BadUpload(f"{what} is no longer on the server (it expired): upload it again", what) from None


def _stored_value(value: Mapping[str, Any], blob_storage: dict[str, Any]) -> dict[str, Any]:
    """The editor's files, from its blob storage when the page sent them there (taken out: used once)."""
    blob_id = value.get("id")
    if blob_id is None:
        return dict(value)
    blobs = blob_storage.pop(blob_id, None)
    if blobs is None:
        raise BadUpload("the image did not reach the server; upload it again", "image")
    return {"background": blobs.background, "layers": blobs.layers, "composite": blobs.composite}


def strokes_mask(layers: list[Image.Image]) -> Image.Image | None:
    """The layers' drawn pixels (any opacity) as a white-on-black mask; None when nothing is drawn."""
    mask: Image.Image | None = None
    for layer in layers:
        alpha = layer.convert("RGBA").getchannel("A").point(lambda value: 255 if value > 0 else 0)
        mask = alpha if mask is None else ImageChops.lighter(mask, alpha)
    return mask if mask is not None and mask.getbbox() is not None else None


def editor_source(
    value: object,
    strength: float | None,
    *,
    blob_storage: dict[str, Any],
    uploaded: Collection[str],
    cache_dir: str,
    limits: UploadLimits,
) -> EditSource:
    """The editor's value as an edit (image to image without strokes, inpainting with them); BadUpload naming what
    is wrong. Decodes images: call it off the event loop."""
    if not isinstance(value, Mapping):
        raise BadUpload(NO_IMAGE, "image")
    files = _stored_value(value, blob_storage)
    background = _file_bytes(files.get("background"), "image", uploaded, cache_dir)
    if background is None:
        raise BadUpload(NO_IMAGE, "image")
    image = open_image(background, "image", limits)
    layers = files.get("layers") or []
    if not isinstance(layers, list):
        raise BadUpload("the mask layers must be a list of uploaded files", "mask")
    opened = []
    for layer in layers:
        data = _file_bytes(layer, "mask", uploaded, cache_dir)
        if data is not None:
            opened.append(open_image(data, "mask", limits))
    return edit_source(image, strokes_mask(opened), strength)


def fitted_size(size: tuple[int, int], bounds: SizeBounds) -> tuple[int, int]:
    """An uploaded picture's size brought within the model's bounds and onto its grid, keeping its shape roughly: a
    photo of any size can be edited without typing a size."""
    width, height = size
    scale = min(1.0, bounds.max_side / max(width, height))
    step = bounds.multiple_of

    def side(value: float) -> int:
        return min(max(int(value * scale) // step * step, bounds.min_side), bounds.max_side)

    return side(width), side(height)


class BoundedBlobStorage(OrderedDict[str, Any]):
    """The editor's blob storage, at most `max_items` canvases kept: gradio 6.31 keeps every canvas the page sends
    until an edit uses it, so canvases sent and never submitted would pile up in memory; past the bound the oldest
    is dropped (an edit of it then asks for the picture again)."""

    def __init__(self, max_items: int) -> None:
        super().__init__()
        self.max_items = max_items

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.max_items:
            self.popitem(last=False)
