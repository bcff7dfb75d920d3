"""Every error a client of the LLM API can meet, as the `openai` client meets it: an OpenAI-shaped JSON body
(`{"error": {"message", "type", "param", "code"}}`) with the right status, never a traceback."""

from __future__ import annotations

import httpx
import openai
import pytest

from common.server_process import free_port
from tests.llm.conftest import MODEL, client_for
from tests.llm.stack import run_gateway
from tests.support.fake_user_pool import API_CLIENT, FakeUserPool

MESSAGES = [{"role": "user", "content": "hi"}]


def error_of(exc: openai.APIStatusError) -> dict[str, object]:
    """The `error` object of an error answer, checked for the OpenAI shape."""
    body = exc.response.json()
    error = body["error"]
    assert set(error) >= {"message", "type", "param", "code"}, body
    assert isinstance(error["message"], str) and error["message"] and "Traceback" not in error["message"]
    return error


def test_unknown_model_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES, max_tokens=2)
    assert "no-such-model" in error_of(caught.value)["message"]


def test_prompt_longer_than_the_context_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=MODEL, prompt="word " * 6000, max_tokens=2)
    message = str(error_of(caught.value)["message"])
    assert "4096" in message, message  # the tiny model's context length, named in vLLM's message


@pytest.mark.parametrize(
    "params",
    [{"temperature": -1.0}, {"max_tokens": -5}, {"n": 0}],
    ids=["negative-temperature", "negative-max-tokens", "zero-choices"],
)
def test_bad_parameters_are_a_400(client, params):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, **params)
    error_of(caught.value)


def test_body_that_is_not_json_is_a_400(gateway):
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_body_too_large_is_a_413(client):
    with pytest.raises(openai.APIStatusError) as caught:
        client.completions.create(model=MODEL, prompt="x" * (2 * 1024 * 1024), max_tokens=2)
    assert caught.value.status_code == 413
    assert error_of(caught.value)["type"] == "request_too_large"


def test_unknown_route_and_wrong_method(gateway):
    unknown = httpx.post(f"{gateway.url}/v1/audio/speech", json={"model": MODEL, "input": "x"})
    assert unknown.status_code == 404 and "/v1/chat/completions" in unknown.json()["error"]["message"]
    wrong = httpx.get(f"{gateway.url}/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


def test_not_signed_in_is_a_401_and_a_token_passes(engine_url, tmp_path):
    pool = FakeUserPool()
    with (
        pool.serving(),
        run_gateway(
            engine_url,
            tmp_path,
            {"AUTH": "cognito", "AUTH_ISSUER": pool.issuer, "AUTH_CLIENT_IDS": API_CLIENT},
        ) as gateway,
    ):
        with pytest.raises(openai.AuthenticationError) as caught:
            client_for(gateway.url, api_key="not-a-token").models.list()
        assert error_of(caught.value)["type"] == "authentication_error"
        with pytest.raises(openai.AuthenticationError) as expired:
            client_for(gateway.url, api_key=pool.token(exp=1)).models.list()
        assert "expired" in str(error_of(expired.value)["message"])
        no_header = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES})
        assert no_header.status_code == 401 and no_header.headers["www-authenticate"].startswith("Bearer")
        signed_in = client_for(gateway.url, api_key=pool.token())
        assert [model.id for model in signed_in.models.list()] == [MODEL]
        reply = signed_in.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
        assert reply.usage.completion_tokens <= 2
        assert httpx.get(f"{gateway.url}/readiness").status_code == 200  # probes need no token


def test_over_the_concurrency_bound_is_a_429_with_retry_after(engine_url, tmp_path):
    with run_gateway(engine_url, tmp_path, {"MAX_CONCURRENT_REQUESTS": "1", "RETRY_AFTER_S": "3"}) as gateway:
        client = client_for(gateway.url)
        # 4,000 tokens (of the 4,096 context): over a second even at the CPU engine's fastest (2,500 tokens a
        # second), so the first still holds the one slot when the second comes; 600 were over before it came.
        stream = client.completions.create(
            model=MODEL, prompt="a", max_tokens=4000, stream=True, extra_body={"ignore_eos": True}
        )
        with stream:
            next(iter(stream))  # the first is in flight
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
            assert caught.value.response.headers["retry-after"] == "3"
            assert error_of(caught.value)["code"] == 429
        records = gateway.wait_record(2)
        (first,) = [r["outcome"] for r in records if r["outcome"] != "refused"]
        # The first left after one event: "client_gone", or "completed" when a fast engine had already made the
        # whole answer and the gateway had handed it all to the socket before the client closed it.
        assert len(records) == 2 and first in ("client_gone", "completed"), records


def test_engine_down_is_a_503_and_not_ready(tmp_path):
    with run_gateway(f"http://127.0.0.1:{free_port()}", tmp_path) as gateway:
        assert httpx.get(f"{gateway.url}/health").status_code == 200
        readiness = httpx.get(f"{gateway.url}/readiness")
        assert readiness.status_code == 503 and "engine" in readiness.json()["error"]["message"]
        with pytest.raises(openai.APIStatusError) as caught:
            client_for(gateway.url).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
        assert caught.value.status_code == 503
        assert error_of(caught.value)["type"] == "service_unavailable"
        assert gateway.wait_record(1)[-1]["outcome"] == "upstream_error"
