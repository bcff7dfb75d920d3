"""What the page says about its model, in a real Chromium: the model loaded by name; a failed load with its reason
where the reader is the operator (bound to loopback, as `make run`), with only its error id elsewhere; and no
Share button on the image (Gradio's shares to Hugging Face Spaces only)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.settings import Settings, load_settings
from tests.app.live_server import TEST_SETTINGS, LiveServer

pytestmark = pytest.mark.browser

REASON = "the model files are unreadable"


def failing_loader(_settings: Settings):
    raise OSError(f"{REASON}: /models/sd/unet")


@contextmanager
def failed_page(browser: Browser, tmp_path, host: str) -> Iterator[Page]:
    """The page of a service bound to `host` whose model failed to load, once /readiness says so."""
    settings = load_settings(**{**TEST_SETTINGS, "model_cache_dir": tmp_path, "host": host})
    with serve_in_thread(create_app(settings, failing_loader)) as url:
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/readiness", timeout=10).json()["status"] != "load failed":
            assert time.monotonic() < deadline, "the load did not fail"
            time.sleep(0.1)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url + "/", wait_until="domcontentloaded")
        page.get_by_text("The model failed to load").wait_for(timeout=30_000)
        yield page
        page.close()


def test_the_page_names_the_model_loaded(browser: Browser, live_service: LiveServer):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_service.url + "/", wait_until="domcontentloaded")
    expect(page.locator("#model-status")).to_contain_text(
        "Model loaded: builtin:tiny. Model family: Stable Diffusion", timeout=60_000
    )
    page.close()


def test_a_failed_load_says_why_where_the_reader_is_the_operator(browser: Browser, tmp_path):
    with failed_page(browser, tmp_path, "127.0.0.1") as page:
        status = page.locator("#model-status").inner_text()
    assert f"OSError: {REASON}" in status and "restart" in status
    assert "the operator must fix it" not in status


def test_on_the_cluster_a_failed_load_shows_only_its_error_id(browser: Browser, tmp_path):
    with failed_page(browser, tmp_path, "0.0.0.0") as page:
        status = page.locator("#model-status").inner_text()
    assert "the operator must fix it" in status and "error id" in status
    assert REASON not in status and "/models" not in status  # paths and buckets stay in the log


def test_the_image_has_download_and_fullscreen_but_no_share_button(browser: Browser, live_service: LiveServer):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_service.url + "/", wait_until="domcontentloaded")
    page.get_by_text("Demo model loaded").wait_for(timeout=60_000)
    page.locator("#prompt textarea").fill("a lighthouse")
    page.locator("#generate").click()
    page.locator("#result img").wait_for(state="visible", timeout=60_000)
    labels = [
        label.lower()
        for label in page.locator("#result button").evaluate_all(
            "buttons => buttons.map(b => b.getAttribute('aria-label') || b.title || b.innerText)"
        )
    ]
    assert any("download" in label for label in labels), labels
    assert not any("share" in label for label in labels), labels
    page.close()
