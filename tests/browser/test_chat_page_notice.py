"""The chat page says when it talks to the built-in demo model (random weights: its text is noise, not a bug), and
only then: in a real Chromium, the gateway in front of the stand-in engine listing either model name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from llm_gateway.chat_page import PAGE_FILE
from llm_local.engine import SERVED_MODEL_NAME
from tests.llm.stack import run_gateway, run_standin

pytestmark = pytest.mark.browser


def test_the_page_knows_the_built_in_models_name():
    # The page's list is a copy of llm_local's name: this keeps the two the same.
    (names,) = re.findall(r"const DEMO_MODELS = \[(.*?)\];", PAGE_FILE.read_text(encoding="utf-8"))
    assert f'"{SERVED_MODEL_NAME}"' in names


@pytest.mark.parametrize(("served", "notice"), [(SERVED_MODEL_NAME, True), ("meta-llama/Llama-3.1-8B-Instruct", False)])
def test_a_demo_model_notice_shows_for_the_built_in_model_only(
    browser: Browser, tmp_path: Path, served: str, notice: bool
):
    with run_standin() as (engine_url, engine):
        engine.model = served  # what its /v1/models lists
        with run_gateway(engine_url, tmp_path, env={"CHAT_PAGE": "true"}) as gateway:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(gateway.url + "/", wait_until="domcontentloaded")
            expect(page.locator("#model")).to_have_text(served, timeout=30_000)
            if notice:
                expect(page.locator("#notice")).to_be_visible()
                assert "random weights" in page.locator("#notice").inner_text()
            else:
                expect(page.locator("#notice")).to_be_hidden()
            page.close()
