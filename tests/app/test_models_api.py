"""GET /v1/models and /v1/models/{id} through the official `openai` client against the real server: the built-in
model (tests/conftest.py `live_service`), and a stand-in SDXL backend served under a Hub-style MODEL_NAME, the name
the deploy gives every pod (the list's id is the `model` /v1/images/generations accepts)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from app.models.families import SDXL
from tests.app.fakes import FakeBackend
from tests.app.live_server import LiveServer, serve

HUB_NAME = "example-org/sdxl-test"


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused-without-sign-in", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def named_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A stand-in SDXL backend behind the real stack, served as HUB_NAME."""
    backend = FakeBackend()
    backend.family, backend.bounds = SDXL, SDXL.bounds
    with serve(tmp_path_factory.mktemp("unused"), loader=lambda _settings: backend, model_name=HUB_NAME) as live:
        yield live


def test_the_sdk_lists_the_served_model_with_its_family(live_service):
    served = httpx.get(f"{live_service.url}/v1/info").json()["model"]
    (model,) = list(sdk(live_service.url).models.list())
    assert (model.id, model.object, model.owned_by) == (served, "model", "sd-on-eks")
    assert model.model_extra == {"family": "sd"}
    assert abs(model.created - time.time()) < 3600


def test_the_sdk_retrieves_the_served_model_and_is_told_what_else_does_not_exist(live_service):
    client = sdk(live_service.url)
    (listed,) = list(client.models.list())
    assert client.models.retrieve(listed.id) == listed
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4o")
    assert caught.value.body["message"] == f"the model 'gpt-4o' does not exist here; this server serves {listed.id!r}"
    assert caught.value.body["code"] == "model_not_found"


def test_a_hub_name_with_a_slash_is_listed_retrieved_and_accepted_for_images(named_service):
    client = sdk(named_service.url)
    (model,) = list(client.models.list())
    assert (model.id, model.owned_by, model.model_extra) == (HUB_NAME, "example-org", {"family": "sdxl"})
    assert client.models.retrieve(HUB_NAME) == model  # the client quotes the slash
    answer = client.images.generate(prompt="a fox", model=model.id, size="64x64", extra_body={"steps": 1})
    assert answer.data is not None and len(answer.data) == 1
    with pytest.raises(openai.BadRequestError, match="GET /v1/models"):
        client.images.generate(prompt="a fox", model="builtin:tiny", size="64x64")


def test_the_model_paths_take_get_only_and_answer_in_openais_shape(named_service):
    answer = httpx.post(f"{named_service.url}/v1/models", json={})
    assert answer.status_code == 405 and answer.headers["allow"] == "GET"
    assert answer.json()["error"]["type"] == "invalid_request_error"
