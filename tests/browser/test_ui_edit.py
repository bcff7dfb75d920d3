"""The UI's Edit tab in a real Chromium: upload a PNG, press Edit, an image appears; a bad upload says why."""

from __future__ import annotations

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.app.live_server import LiveServer

pytestmark = pytest.mark.browser


def open_edit_tab(browser, live: LiveServer):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live.url + "/", wait_until="domcontentloaded")
    page.get_by_text("Demo model loaded").wait_for(timeout=60_000)
    page.get_by_role("tab", name="Edit").click()
    return page


def edited_image(page):
    """The Edit tab's result once shown; a failure naming what the page said instead when it showed an error."""
    image = page.locator("#edit-result img")
    error = page.locator(".toast-body")
    image.or_(error).first.wait_for(state="visible", timeout=60_000)
    if error.count():
        pytest.fail(f"the page showed an error instead of an image: {error.all_inner_texts()}")
    return image


def test_an_uploaded_png_is_edited_into_an_image(browser, live_service: LiveServer, tmp_path):
    picture = tmp_path / "photo.png"
    Image.new("RGB", (80, 64), (30, 120, 200)).save(picture)
    page = open_edit_tab(browser, live_service)
    # As a person does: press Edit once the picture shows. The editor reads the file in the page, and a click before
    # it has (seen in CI under load) sends an empty editor, which the page answers with NO_IMAGE. Its Pan tool is
    # enabled once a picture is on the canvas.
    pan = page.locator('#edit-image button[aria-label="Pan"]')
    expect(pan).to_be_disabled()
    page.locator("#edit-image input[type=file]").set_input_files(str(picture))
    expect(pan).to_be_enabled(timeout=60_000)
    page.locator("#edit-prompt textarea").fill("a lighthouse in the fog")
    page.locator("#edit").click()
    image = edited_image(page)
    assert image.evaluate("img => img.complete && [img.naturalWidth, img.naturalHeight]") == [80, 64]
    assert "seed" in page.locator("#edit-caption").inner_text(timeout=10_000)
    page.close()


def test_a_non_image_upload_is_not_edited_and_the_page_says_why(browser, live_service: LiveServer, tmp_path):
    notes = tmp_path / "notes.png"  # an image's name, not an image's bytes
    notes.write_bytes(b"not an image at all")
    page = open_edit_tab(browser, live_service)
    page.locator("#edit-image input[type=file]").set_input_files(str(notes))
    page.locator("#edit-prompt textarea").fill("a lighthouse in the fog")
    page.locator("#edit").click()
    page.get_by_text("upload an image to edit first").first.wait_for(timeout=60_000)
    assert page.locator("#edit-result img").count() == 0
    page.close()
