"""The UI's Edit tab through Gradio's own protocol on the real HTTP stack: uploads checked before Gradio keeps them,
an edit with and without a mask layer, and files that were never uploaded refused."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from tests.app.held import wait_until
from tests.app.live_server import LiveServer
from tests.app.ui_protocol import ui_click, ui_error, ui_upload


def png(size: tuple[int, int], mode: str = "RGB", color: Any = (200, 80, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def mask_layer(size: tuple[int, int]) -> bytes:
    """A brush layer as the editor exports it: transparent, with a painted square."""
    layer = Image.new("RGBA", size, (0, 0, 0, 0))
    layer.paste((0, 0, 0, 255), (8, 8, 40, 40))
    buffer = io.BytesIO()
    layer.save(buffer, format="PNG")
    return buffer.getvalue()


def edit_data(editor: Any, strength: float = 0.8) -> list[Any]:
    # editor, prompt, negative prompt, steps, guidance, seed, adapters, adapter scale, strength
    return [editor, "a lighthouse in the fog", "", 2, 7.5, "7", [], 1.0, strength]


def uploaded(live: LiveServer, name: str, data: bytes) -> dict[str, Any]:
    response = ui_upload(live.url, name, data)
    assert response.status_code == 200, response.text
    (path,) = response.json()
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def test_an_uploaded_png_is_kept_and_edited_without_a_mask(live_service: LiveServer):
    image = uploaded(live_service, "photo.png", png((96, 80)))
    message = ui_click(live_service.url, "edit", edit_data({"background": image, "layers": [], "composite": None}))
    assert message["success"], ui_error(message)
    result = message["output"]["data"][0]
    served = httpx.get(result["url"], timeout=10)
    assert Image.open(io.BytesIO(served.content)).size == (96, 80)  # the picture's size, on the model's grid
    assert "seed 7" in message["output"]["data"][1]


def test_a_painted_layer_is_the_mask_and_the_edit_inpaints(live_service: LiveServer):
    image = uploaded(live_service, "photo.png", png((64, 64)))
    layer = uploaded(live_service, "layer_0.png", mask_layer((64, 64)))
    editor = {"background": image, "layers": [layer], "composite": None}
    message = ui_click(live_service.url, "edit", edit_data(editor))
    assert message["success"], ui_error(message)
    small = uploaded(live_service, "layer_0.png", mask_layer((32, 32)))
    message = ui_click(live_service.url, "edit", edit_data({"background": image, "layers": [small]}))
    assert "must be the same size" in (ui_error(message) or "")


def test_a_non_image_upload_is_refused_with_a_readable_message(live_service: LiveServer):
    response = ui_upload(live_service.url, "notes.txt", b"not an image at all")
    assert response.status_code == 422
    assert response.json()["detail"] == [{"field": "files", "message": "notes.txt is not a PNG, JPEG or WebP image"}]


def test_an_oversized_upload_is_refused_before_gradio_keeps_it(live_service: LiveServer):
    limit = live_service.settings.max_upload_bytes
    big = png((64, 64)) + b"\0" * limit  # a valid PNG, padded past MAX_UPLOAD_BYTES (the body bound is twice that)
    response = ui_upload(live_service.url, "big.png", big)
    assert response.status_code == 422
    assert f"the limit is {limit}" in response.json()["error"]
    over_body = ui_upload(live_service.url, "huge.png", b"\0" * (live_service.settings.edit_body_limits.max_bytes + 1))
    assert over_body.status_code == 413


def test_a_decompression_bomb_upload_is_refused(live_service: LiveServer):
    side = 8192  # a 1-bit PNG compresses to little while declaring side x side pixels, past MAX_UPLOAD_PIXELS
    assert side * side > live_service.settings.max_upload_pixels
    response = ui_upload(live_service.url, "bomb.png", png((side, side), mode="1", color=0))
    assert response.status_code == 422
    assert "pixels" in response.json()["error"]


def test_an_edit_of_a_file_that_was_never_uploaded_is_refused(live_service: LiveServer):
    for path in ("/etc/hostname", "../../etc/hostname", "nothing.png"):
        editor = {"background": {"path": path, "meta": {"_type": "gradio.FileData"}}, "layers": []}
        message = ui_click(live_service.url, "edit", edit_data(editor))
        assert "not a file uploaded to this page" in (ui_error(message) or ""), message


def test_an_edit_without_an_image_says_so(live_service: LiveServer):
    message = ui_click(live_service.url, "edit", edit_data(None))
    assert (ui_error(message) or "").startswith("upload an image to edit first"), message


def test_uploads_expire_after_the_ui_file_ttl(held_service):
    live, _backend = held_service  # UI_FILE_TTL_S=1 there
    response = ui_upload(live.url, "photo.png", png((64, 64)))
    assert response.status_code == 200
    (path,) = response.json()
    wait_until(lambda: Path(path).exists())  # Gradio moves the file into place after answering
    wait_until(lambda: not Path(path).exists(), timeout_s=30)


def editor_component_id(live: LiveServer) -> int:
    config = httpx.get(f"{live.url}/config", timeout=10).json()
    (component,) = [c for c in config["components"] if c.get("props", {}).get("elem_id") == "edit-image"]
    return int(component["id"])


def send_blob(live: LiveServer, component_id: int, blob_id: str, index: str) -> httpx.Response:
    """A canvas layer as the editor's page sends it to `accept_blobs` (gradio 6.31 routes.py component_server)."""
    fields = {
        "component_id": str(component_id),
        "session_hash": "edit-tab-test",
        "fn_name": "accept_blobs",
        "id": blob_id,
        "type": "layer",
        "index": index,
    }
    files = {"file": ("layer.png", mask_layer((64, 64)), "image/png")}
    return httpx.post(f"{live.url}/gradio_api/component_server", data=fields, files=files, timeout=30)


def test_a_canvas_layer_index_is_bounded_before_gradio_grows_its_list(live_service: LiveServer):
    component_id = editor_component_id(live_service)
    assert send_blob(live_service, component_id, "canvas-1", "0").status_code == 200
    # Gradio extends the canvas's list of layers to the index sent: a billion would be gigabytes of memory.
    refused = send_blob(live_service, component_id, "canvas-2", "1000000000")
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["field"] == "index"


def test_canvases_never_submitted_do_not_pile_up():
    from app.ui_edits import BoundedBlobStorage

    storage = BoundedBlobStorage(max_items=3)
    for n in range(10):
        storage[f"canvas-{n}"] = n
    storage["canvas-8"] = "updated"  # a canvas the page sends to again is the newest
    storage["canvas-10"] = 10
    assert list(storage) == ["canvas-9", "canvas-8", "canvas-10"]
