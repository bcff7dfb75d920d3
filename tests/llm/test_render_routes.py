"""vLLM 0.27.1's render routes through the gateway (RENDER_ROUTES, for vllm-router's cache_aware): forwarded with
sign-in, bad bodies refused in the gateway's shape, bounded as lookups, and not served at all with the setting off
(the Neuron pods: vLLM 0.13.0 has no such route). Through the real gateway process in front of the stand-in engine,
which answers the routes in vLLM 0.27.1's shape (llm_bench/standin_engine.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llm_bench.standin_engine import STANDIN_MODEL
from llm_gateway.routes import CHAT_COMPLETIONS_RENDER_PATH, COMPLETIONS_RENDER_PATH
from tests.llm.scripted_engine import ScriptedEngine
from tests.llm.stack import GatewayProcess, run_gateway, run_standin, wait_until
from tests.llm.test_engine_bounds import LOOKUP_TIMEOUT_S, LOOKUPS, SLACK_S, ask_concurrently, silent_engine
from tests.llm.test_gateway_bounds import openai_error, request, statuses
from tests.support.fake_user_pool import API_CLIENT, FakeUserPool

__all__ = ["silent_engine"]  # the fixture, shared with test_engine_bounds
ON = {"RENDER_ROUTES": "true"}
PROMPT = "the sea light house"


@pytest.fixture(scope="module")
def pool() -> Iterator[FakeUserPool]:
    """The sign-in the gateway checks tokens against."""
    users = FakeUserPool()
    with users.serving():
        yield users


@pytest.fixture(scope="module")
def gateway(pool: FakeUserPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A signed-in gateway with the render routes on, in front of the stand-in."""
    settings = {"AUTH": "cognito", "AUTH_ISSUER": pool.issuer, "AUTH_CLIENT_IDS": API_CLIENT, **ON}
    with run_standin() as (url, _), run_gateway(url, tmp_path_factory.mktemp("render"), settings) as process:
        yield process


def signed(pool: FakeUserPool) -> dict[str, str]:
    return {"authorization": f"Bearer {pool.token()}"}


def test_completions_render_is_forwarded_in_vllms_shape(gateway, pool):
    answer = httpx.post(
        f"{gateway.url}{COMPLETIONS_RENDER_PATH}",
        json={"model": STANDIN_MODEL, "prompt": PROMPT, "max_tokens": 4},
        headers=signed(pool),
    )
    assert answer.status_code == 200, answer.text
    (rendered,) = answer.json()  # a list of GenerateRequest, one per prompt
    assert len(rendered["token_ids"]) == len(PROMPT.split()) and rendered["model"] == STANDIN_MODEL


def test_chat_render_is_forwarded_and_counts_no_usage(gateway, pool):
    before = len(gateway.records())
    body = {"model": STANDIN_MODEL, "messages": [{"role": "user", "content": PROMPT}]}
    answer = httpx.post(f"{gateway.url}{CHAT_COMPLETIONS_RENDER_PATH}", json=body, headers=signed(pool))
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["token_ids"]) == len(PROMPT.split())
    assert len(gateway.records()) == before  # nothing generated: no usage record


@pytest.mark.parametrize("path", [COMPLETIONS_RENDER_PATH, CHAT_COMPLETIONS_RENDER_PATH])
def test_render_needs_a_token(gateway, path):
    answer = httpx.post(f"{gateway.url}{path}", json={"model": STANDIN_MODEL, "prompt": PROMPT})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")


def test_a_render_body_that_is_not_json_is_a_400_in_the_gateways_shape(gateway, pool):
    answer = httpx.post(f"{gateway.url}{COMPLETIONS_RENDER_PATH}", content=b"{not json", headers=signed(pool))
    assert answer.status_code == 400
    assert "not valid JSON" in answer.json()["error"]["message"]
    assert httpx.get(f"{gateway.url}{COMPLETIONS_RENDER_PATH}", headers=signed(pool)).status_code == 405


@pytest.mark.parametrize("path", [COMPLETIONS_RENDER_PATH, CHAT_COMPLETIONS_RENDER_PATH])
def test_render_is_not_served_with_the_setting_off(tmp_path: Path, path: str):
    with run_standin() as (url, engine), run_gateway(url, tmp_path) as gateway:
        answer = httpx.post(f"{gateway.url}{path}", json={"model": STANDIN_MODEL, "prompt": PROMPT})
    assert answer.status_code == 404 and answer.json()["error"]["message"].startswith(f"no route {path}")
    assert engine.renders == 0


def test_renders_against_an_engine_that_never_answers_are_bounded_as_lookups(
    silent_engine: ScriptedEngine, tmp_path: Path
):
    env = {"MAX_CONCURRENT_LOOKUPS": str(LOOKUPS), "LOOKUP_TIMEOUT_S": str(LOOKUP_TIMEOUT_S), **ON}
    raw = request("POST", COMPLETIONS_RENDER_PATH, b'{"model": "standin", "prompt": "hi"}')
    with run_gateway(silent_engine.url, tmp_path, env) as gateway:
        clients = 3 * LOOKUPS
        results: list[tuple[bytes, float]] = []
        flood = threading.Thread(target=lambda: results.extend(ask_concurrently(gateway, raw, clients)))
        flood.start()
        wait_until(lambda: silent_engine.connections >= LOOKUPS, 15, "the renders to reach the engine")
        flood.join(60)
    answered = {status: [a for a, _ in results if statuses(a) == [status]] for status in (429, 503)}
    assert len(answered[429]) == clients - LOOKUPS, [a[:120] for a, _ in results]
    assert len(answered[503]) == LOOKUPS, [a[:120] for a, _ in results]
    assert "did not answer within 2 s" in str(openai_error(answered[503][0])["message"])
    assert max(elapsed for _, elapsed in results) < LOOKUP_TIMEOUT_S + SLACK_S
    assert silent_engine.connections == LOOKUPS
