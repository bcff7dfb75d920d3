"""The gateway's own part in the routes it added (retrieve model, embeddings, the Responses API): sign-in, the
concurrency bound, the body limit, token counts and metrics, through the real gateway process in front of the
stand-in engine (llm_bench/standin_engine.py), with the official `openai` client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from common import metric_names as m
from llm_bench.standin_engine import STANDIN_MODEL, Pace
from tests.llm.conftest import client_for
from tests.llm.stack import GatewayProcess, run_gateway, run_standin
from tests.llm.test_metrics_bridge import EMF, emf_lines, series, wait_for
from tests.support.fake_user_pool import API_CLIENT, FakeUserPool

LIMIT = 2
TTFT_S = 0.4  # the stand-in's pace: long enough to hold a slot while another request arrives
BODY_LIMIT = 4096


@pytest.fixture(scope="module")
def pool() -> Iterator[FakeUserPool]:
    """The sign-in the gateway checks tokens against."""
    users = FakeUserPool()
    with users.serving():
        yield users


@pytest.fixture(scope="module")
def gateway(pool: FakeUserPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A signed-in gateway with a bound of LIMIT sequences and METRICS=emf, in front of the paced stand-in."""
    settings = {
        "AUTH": "cognito",
        "AUTH_ISSUER": pool.issuer,
        "AUTH_CLIENT_IDS": API_CLIENT,
        "MAX_CONCURRENT_REQUESTS": str(LIMIT),
        "MAX_BODY_BYTES": str(BODY_LIMIT),
        **EMF,
    }
    with (
        run_standin(pace=Pace(ttft_s=TTFT_S, gap_s=0.0)) as (url, _),
        run_gateway(url, tmp_path_factory.mktemp("routes"), settings) as process,
    ):
        yield process


@pytest.fixture
def client(gateway: GatewayProcess, pool: FakeUserPool) -> openai.OpenAI:
    """The official client, signed in."""
    return client_for(gateway.url, api_key=pool.token())


@pytest.mark.parametrize("method,path", [("GET", f"/v1/models/{STANDIN_MODEL}"), ("POST", "/v1/embeddings")])
def test_the_new_routes_need_a_token(gateway, method, path):
    answer = httpx.request(method, f"{gateway.url}{path}", json={"model": STANDIN_MODEL, "input": "hi"})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(openai.AuthenticationError):
        client_for(gateway.url, api_key="not-a-token").responses.create(model=STANDIN_MODEL, input="hi")


def test_models_retrieve(client, gateway):
    assert client.models.retrieve(STANDIN_MODEL).id == STANDIN_MODEL
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("org/other-model")  # an id with a slash: the SDK quotes it, the gateway reads it whole
    assert (
        raised.value.body["message"] == "the model 'org/other-model' does not exist here; this server serves 'standin'"
    )
    assert raised.value.body["param"] == "model"
    assert httpx.post(f"{gateway.url}/v1/models/{STANDIN_MODEL}").status_code == 405


def test_embeddings_are_counted_and_bounded(client, gateway):
    before = len(gateway.records())
    reply = client.embeddings.create(model=STANDIN_MODEL, input=["one two three", "four five"])
    assert [item.embedding for item in reply.data] == [[1.0, 0.0], [1.0, 0.0]]
    # A batch larger than the bound is admitted and takes the whole bound while it runs, rather than a 400.
    assert len(client.embeddings.create(model=STANDIN_MODEL, input=["x"] * (LIMIT * 3)).data) == LIMIT * 3
    first, batch = gateway.wait_record(before + 2)[-2:]
    assert (first["route"], first["prompt_tokens"], first["completion_tokens"]) == ("/v1/embeddings", 5, 0)
    assert (batch["status"], batch["prompt_tokens"]) == (200, LIMIT * 3)
    with pytest.raises(openai.APIStatusError) as too_large:
        client.embeddings.create(model=STANDIN_MODEL, input=["word"] * BODY_LIMIT)
    assert too_large.value.status_code == 413


def test_responses_are_counted_whole_and_streamed(client, gateway):
    before = len(gateway.records())
    reply = client.responses.create(model=STANDIN_MODEL, input="a b c", max_output_tokens=4)
    assert reply.output_text == " tok" * 4 and reply.usage.output_tokens == 4
    events = list(client.responses.create(model=STANDIN_MODEL, input="a b c", max_output_tokens=3, stream=True))
    assert [event.type for event in events].count("response.output_text.delta") == 3
    whole, streamed = gateway.wait_record(before + 2)[-2:]
    assert (whole["route"], whole["prompt_tokens"], whole["completion_tokens"]) == ("/v1/responses", 3, 4)
    assert (streamed["stream"], streamed["prompt_tokens"], streamed["completion_tokens"]) == (True, 3, 3)
    assert streamed["ttft_ms"] >= TTFT_S * 1000  # the first delta, not the stream's opening event


def test_the_record_names_the_clients_request_id(client, gateway):
    """The client's X-Request-Id in the gateway's record: one request followed through the gateway's log (and, with
    vllm-router in front, which worker served it: python -m tools.router_policies)."""
    before = len(gateway.records())
    client.completions.create(model=STANDIN_MODEL, prompt="a b", max_tokens=2, extra_headers={"X-Request-Id": "c7-t2"})
    client.completions.create(model=STANDIN_MODEL, prompt="a b", max_tokens=2)
    named, unnamed = gateway.wait_record(before + 2)[-2:]
    assert (named["request_id"], unnamed.get("request_id")) == ("c7-t2", None)


def test_each_route_takes_its_share_of_the_bound(client, gateway):
    """A Responses stream holds one slot; an embeddings batch of two then exceeds the bound of two: a 429."""
    stream = client.responses.create(model=STANDIN_MODEL, input="hold", max_output_tokens=2, stream=True)
    with stream:
        started = threading.Event()
        holder = threading.Thread(target=lambda: (started.set(), list(stream)))
        holder.start()
        started.wait()
        time.sleep(0.05)
        with pytest.raises(openai.RateLimitError) as refused:
            client.embeddings.create(model=STANDIN_MODEL, input=["a", "b"])
        assert f"of {LIMIT} sequences are already in flight" in refused.value.message
        assert refused.value.response.headers["retry-after"] == "1"
        holder.join(10)
    assert client.embeddings.create(model=STANDIN_MODEL, input=["a", "b"]).usage.prompt_tokens == 2


def test_the_new_routes_are_in_the_metrics(client, gateway):
    """Every request on the new routes is a Requests sample with its tokens (the EMF lines, as on the cluster)."""
    requests_before = sum(series(emf_lines(gateway), m.REQUESTS.name))
    tokens_before = sum(series(emf_lines(gateway), m.PROMPT_TOKENS.name))
    client.embeddings.create(model=STANDIN_MODEL, input="one two three four five six seven")
    client.responses.create(model=STANDIN_MODEL, input="eight nine", max_output_tokens=2)
    lines = wait_for(gateway, m.REQUESTS.name, requests_before + 2)
    assert sum(series(lines, m.PROMPT_TOKENS.name)) >= tokens_before + 9
