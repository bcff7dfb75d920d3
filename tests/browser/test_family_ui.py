"""The page fits its controls to the model's family: FLUX.1-schnell and SDXL folders served in a real Chromium."""

from __future__ import annotations

import pytest

from tests.app.live_server import serve
from tests.support.family_folders import FAMILY_SETTINGS, saved_folder

pytestmark = pytest.mark.browser


def test_flux_hides_guidance_and_negative_prompt_and_draws_a_portrait_preset(browser, tmp_path):
    with serve(tmp_path, model_id=str(saved_folder("builtin:tiny-flux", tmp_path)), **FAMILY_SETTINGS) as live:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(live.url + "/", wait_until="domcontentloaded")
        page.get_by_text("Model family: FLUX.1-schnell").wait_for(timeout=60_000)
        page.get_by_text("Options").click()
        page.locator("#size-presets").wait_for(timeout=10_000)
        assert page.locator("#guidance").is_hidden() and page.locator("#negative-prompt").is_hidden()
        assert page.get_by_role("spinbutton", name="Steps").input_value() == "4"
        # FLUX.1-schnell's 768x1024 scaled to the tiny model's 256 px: 192x256, on the 16-pixel grid.
        page.get_by_label("192 x 256 (portrait)").check()
        page.locator("#prompt textarea").fill("a lighthouse on a cliff at dusk")
        page.locator("#generate").click()
        image = page.locator("#result img")
        image.wait_for(state="visible", timeout=60_000)
        assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [192, 256]
        page.close()


def test_sdxl_shows_guidance_negative_prompt_and_its_trained_aspect_ratios(browser, tmp_path):
    with serve(tmp_path, model_id=str(saved_folder("builtin:tiny-sdxl", tmp_path)), **FAMILY_SETTINGS) as live:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(live.url + "/", wait_until="domcontentloaded")
        page.get_by_text("Model family: Stable Diffusion XL").wait_for(timeout=60_000)
        page.get_by_text("Options").click()
        page.locator("#size-presets").wait_for(timeout=10_000)
        assert page.locator("#guidance").is_visible() and page.locator("#negative-prompt").is_visible()
        assert page.get_by_role("spinbutton", name="Guidance").input_value() == "5"
        labels = page.locator("#size-presets label").all_inner_texts()
        assert labels[:3] == ["128 x 128 (square)", "112 x 144 (portrait)", "144 x 112 (landscape)"]
        page.close()
