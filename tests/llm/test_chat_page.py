"""The chat page of `make run-llm` in a real Chromium, against the session's real stack (vLLM's CPU engine
behind the gateway): tokens appear as they stream, Stop ends the generation in the engine, and an error
of the API reads as its message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llm.conftest import MODEL, client_for
from tests.llm.stack import GatewayProcess, engine_metric, run_gateway, wait_until

GENERATION_TIMEOUT_MS = 120_000
MAX_TOKENS = 4000  # the tiny model's context is 4096 tokens; the prompt takes a few dozen

# Records, in the page, every length the answer's text takes while it streams.
WATCH_ANSWER = """() => {
  window.lengths = [];
  new MutationObserver(() => {
    const answers = document.querySelectorAll('.assistant');
    const last = answers[answers.length - 1];
    if (last) window.lengths.push(last.textContent.length);
  }).observe(document.querySelector('#log'), {childList: true, subtree: true, characterData: true});
}"""


def without_eos(route: Any) -> None:
    """The tiny model's random weights end an answer early and at random: ask vLLM (the request still goes to
    it, and its answer streams back untouched) to run to max_tokens."""
    body = json.loads(route.request.post_data)
    route.continue_(post_data=json.dumps({**body, "ignore_eos": True}))


def open_page(browser: Any, gateway: GatewayProcess) -> Any:
    """The chat page, once it has listed the model; page errors (a CSP refusal among them) fail the test."""
    page = browser.new_page(viewport={"width": 1100, "height": 800})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(gateway.url + "/", wait_until="domcontentloaded")
    page.wait_for_function("() => document.querySelector('#model').textContent === 'tiny-llama'", timeout=30_000)
    page.problems = problems
    return page


def test_the_page_is_served_only_when_chat_page_is_on(gateway: GatewayProcess, tmp_path: Path) -> None:
    response = httpx.get(gateway.url + "/", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    policy = response.headers["content-security-policy"]
    assert "script-src 'sha256-" in policy and "connect-src 'self'" in policy
    assert "http" not in response.text.split("<script>")[1], "the page loads nothing from elsewhere"
    with run_gateway("http://127.0.0.1:9", tmp_path) as plain:  # the gateway's default: API only
        refused = httpx.get(plain.url + "/", timeout=10)
    assert refused.status_code == 404
    assert "no route /" in refused.json()["error"]["message"]


@pytest.mark.browser
def test_a_message_streams_its_answer_token_by_token(browser: Any, gateway: GatewayProcess, tmp_path: Path) -> None:
    page = open_page(browser, gateway)
    page.route("**/v1/chat/completions", without_eos)
    page.evaluate(WATCH_ANSWER)
    page.locator("#max-tokens").fill("48")
    page.locator("#message").fill("Tell me about lighthouses")
    page.locator("#message").press("Enter")
    page.wait_for_function("() => document.querySelector('#stats').dataset.outcome", timeout=GENERATION_TIMEOUT_MS)
    assert page.locator("#stats").get_attribute("data-outcome") == "done", page.locator("#error").inner_text()
    lengths = page.evaluate("window.lengths")
    growing = sorted({length for length in lengths if length > 0})
    assert len(growing) >= 5, f"the answer did not grow piece by piece: {lengths}"
    answer = page.locator(".assistant").last.inner_text()
    assert len(answer) == growing[-1]
    assert "48 tokens in" in page.locator("#stats").inner_text()
    assert page.locator(".user").last.inner_text() == "Tell me about lighthouses"
    assert page.locator("#error").inner_text() == ""
    screenshot = tmp_path / "chat-page.png"
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"screenshot: {screenshot}")
    assert page.problems == []
    page.close()


@pytest.mark.browser
def test_stop_ends_the_generation_in_the_engine(
    browser: Any, gateway: GatewayProcess, engine_url: str, tmp_path: Path
) -> None:
    generated_before = engine_metric(engine_url, "vllm:generation_tokens_total")
    records = len(gateway.records())
    page = open_page(browser, gateway)

    page.route("**/v1/chat/completions", without_eos)
    page.locator("#max-tokens").fill(str(MAX_TOKENS))
    page.locator("#message").fill("Write a very long story")
    page.locator("#send").click()
    page.wait_for_function("() => document.querySelector('.assistant').textContent.length > 20", timeout=60_000)
    page.locator("#stop").click()
    page.wait_for_function("() => document.querySelector('#stats').dataset.outcome === 'stopped'", timeout=10_000)
    assert page.locator("#send").is_enabled() and page.locator("#stop").is_disabled()
    wait_until(lambda: engine_metric(engine_url, "vllm:num_requests_running") == 0, 20, "vLLM stops generating")
    # Stopped, not run to the end: vLLM counts client aborts only in its token counter (not its finish stats).
    # How many tokens it made before the abort reached it depends on how busy the machine is; the full
    # answer would be all MAX_TOKENS of them.
    assert engine_metric(engine_url, "vllm:generation_tokens_total") - generated_before < MAX_TOKENS
    assert gateway.wait_record(records + 1)[-1]["outcome"] == "client_gone"
    assert page.locator("#error").inner_text() == ""
    page.close()


@pytest.mark.browser
def test_a_message_larger_than_the_body_limit_reads_as_the_gateways_413(browser: Any, gateway: GatewayProcess) -> None:
    page = open_page(browser, gateway)
    too_long = "word " * 220_000  # over the gateway's default 1 MiB body limit
    page.locator("#message").fill(too_long)
    page.locator("#send").click()
    page.wait_for_function("() => document.querySelector('#stats').dataset.outcome === 'failed'", timeout=30_000)
    assert page.locator("#error").inner_text() == (
        "413 Message too large: the request body is larger than 1048576 bytes"
    )
    assert page.locator(".message").count() == 0, "the refused message is taken out of the conversation"
    assert page.locator("#message").input_value() == too_long.strip(), "and put back for editing"
    page.close()


@pytest.mark.browser
def test_a_busy_gateway_reads_as_its_429_with_retry_after(browser: Any, engine_url: str, tmp_path: Path) -> None:
    settings = {"CHAT_PAGE": "true", "MAX_CONCURRENT_REQUESTS": "1", "RETRY_AFTER_S": "3"}
    with run_gateway(engine_url, tmp_path, settings) as busy:
        holder = client_for(busy.url).completions.create(
            model=MODEL, prompt="a", max_tokens=3000, stream=True, extra_body={"ignore_eos": True}
        )
        try:
            next(iter(holder))  # the one slot is taken while this stream runs
            page = open_page(browser, busy)
            page.locator("#message").fill("hello")
            page.locator("#send").click()
            page.wait_for_function(
                "() => document.querySelector('#stats').dataset.outcome === 'failed'", timeout=30_000
            )
            assert page.locator("#error").inner_text() == (
                "429 Too many requests: 1 of 1 sequences are already in flight here; retry shortly (retry after 3 s)"
            )
            page.close()
        finally:
            holder.close()
