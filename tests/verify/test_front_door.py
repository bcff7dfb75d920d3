"""The front-door checks against a loopback stand-in (tests/verify/front_door_server.py), never the internet:
it answers, it refuses anonymous calls, a signed-in program gets the image API's answer and the LLM's stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.verify.conftest import OUTPUTS, run
from tests.verify.front_door_server import TOKEN, Door, serve
from verify import front_door, llm
from verify.context import Context
from verify.result import Status
from verify.stacks import SERVING

SIGN_IN = {"UserPoolId": "us-east-1_x", "ApiClientId": "c", "TokenUrl": "https://auth/oauth2/token", "ApiScope": "s/g"}


@pytest.fixture
def door_context(make_context) -> Callable[..., Context]:
    """A Context whose ServiceUrl (and LlmBaseUrl with `llm`) is the stand-in's; sign-in outputs unless told."""

    def make(url: str, *, sign_in: bool = True, with_llm: bool = False, token: str = TOKEN) -> Context:
        outputs: dict[str, Any] = json.loads(json.dumps(OUTPUTS))
        outputs[SERVING]["ServiceUrl"] = url
        if sign_in:
            outputs[SERVING] |= SIGN_IN
        if with_llm:
            outputs[SERVING]["LlmBaseUrl"] = f"{url}v1"
        return make_context(outputs=outputs, token=token)

    return make


def test_the_front_door_answers_health(door_context):
    with serve(Door()) as url:
        assert run(front_door.health, door_context(url)).evidence == "GET /health 200"
    with serve(Door(health=502)) as url:
        assert run(front_door.health, door_context(url)).status == Status.FAIL


def test_an_anonymous_call_is_refused(door_context):
    with serve(Door()) as url:
        refused = run(front_door.refuses_anonymous, door_context(url))
    assert refused.status == Status.PASS and refused.evidence.endswith(": 401")
    with serve(Door(signed_in=False)) as url:
        let_in = run(front_door.refuses_anonymous, door_context(url))
    assert let_in.status == Status.FAIL and let_in.evidence.endswith(": 200")


def test_a_signed_in_program_gets_the_image_apis_answer(door_context):
    with serve(Door()) as url:
        answered = run(front_door.image_api_answers, door_context(url))
        wrong_token = run(front_door.image_api_answers, door_context(url, token="expired"))
        no_cognito = run(front_door.image_api_answers, door_context(url, sign_in=False))
    assert answered.status == Status.PASS and "backend cuda" in answered.evidence
    assert wrong_token.status == Status.FAIL and wrong_token.evidence.endswith("401")
    assert no_cognito.status == Status.SKIP


def test_the_llm_streams_through_the_front_door(door_context):
    door = Door(chunks=4)
    with serve(door) as url:
        streamed = run(llm.streams, door_context(url, with_llm=True))
    assert streamed.status == Status.PASS
    assert streamed.evidence.startswith("qwen2.5-1.5b-instruct: 4 chunks")
    assert door.seen == ["GET /v1/models", "POST /v1/chat/completions"]


@pytest.mark.parametrize("door", [Door(chunks=1), Door(chunks=3, done=False)], ids=["one-chunk", "no-done"])
def test_a_stream_in_one_piece_or_cut_short_fails(door_context, door):
    with serve(door) as url:
        assert run(llm.streams, door_context(url, with_llm=True)).status == Status.FAIL


def test_the_llm_stream_refused_without_a_valid_token_fails(door_context):
    with serve(Door()) as url:
        refused = run(llm.streams, door_context(url, with_llm=True, token="expired"))
    assert refused.status == Status.FAIL and refused.evidence == "GET /v1/models 401"


def test_without_the_llm_the_stream_check_skips(door_context):
    assert run(llm.streams, door_context("http://127.0.0.1:9/")).status == Status.SKIP
