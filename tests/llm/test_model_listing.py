"""On the cluster the front door sends /v1/models to the LLM gateway, so its list must hold the image model too: the
real gateway process with IMAGE_MODELS (as cdk/llm/workload.py sets it) in front of the stand-in engine, read with
the official `openai` client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from llm_bench.standin_engine import STANDIN_MODEL
from llm_gateway.model_list import ImageModels
from tests.llm.conftest import client_for
from tests.llm.stack import GatewayProcess, run_gateway, run_standin

IMAGE_MODEL = "stabilityai/stable-diffusion-xl-base-1.0"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway told of one SDXL image model, in front of the stand-in engine."""
    with (
        run_standin() as (url, _),
        run_gateway(url, tmp_path_factory.mktemp("listing"), {"IMAGE_MODELS": json.dumps({IMAGE_MODEL: "sdxl"})}) as p,
    ):
        yield p


def test_one_list_holds_the_engines_model_and_the_image_model(gateway):
    models = {m.id: m for m in client_for(gateway.url).models.list()}
    assert list(models) == [STANDIN_MODEL, IMAGE_MODEL]  # the engine's first, as it lists them
    image = models[IMAGE_MODEL]
    assert (image.object, image.owned_by, image.model_extra) == ("model", "stabilityai", {"family": "sdxl"})


def test_the_image_model_is_retrieved_beside_the_engines(gateway):
    client = client_for(gateway.url)
    assert client.models.retrieve(IMAGE_MODEL).model_extra == {"family": "sdxl"}  # the SDK quotes the slash
    assert client.models.retrieve(STANDIN_MODEL).id == STANDIN_MODEL
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("gpt-4o")
    assert f"serves {STANDIN_MODEL!r}, {IMAGE_MODEL!r}" in raised.value.body["message"]


def test_an_id_the_engine_lists_is_kept_as_the_engine_has_it_and_a_broken_list_passes_as_it_came():
    engine = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm"}]}).encode()
    merged = json.loads(ImageModels({"m": "sd", "n": "flux"}, created=7).add_to(engine))["data"]
    assert merged == [
        {"id": "m", "object": "model", "owned_by": "vllm"},
        {"id": "n", "object": "model", "created": 7, "owned_by": "sd-on-eks", "family": "flux"},
    ]
    assert ImageModels({"n": "flux"}).add_to(b'{"detail": "oops"}') == b'{"detail": "oops"}'
    assert ImageModels({}).add_to(engine) is engine
