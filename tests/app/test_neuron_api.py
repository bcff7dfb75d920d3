"""The Neuron backend's request handling through the real HTTP stack.

The compiled pipeline is a recording stand-in (optimum-neuron cannot be installed here): this checks
our shape check, padding and /v1/info, not Neuron itself.
"""

from __future__ import annotations

import httpx
import pytest

from app.backends.neuron import CompiledPipeline, CompiledShape, NeuronBackend
from app.models.families import SD
from tests.app.fakes import RecordingNeuronPipeline
from tests.app.live_server import serve


@pytest.fixture(scope="module")
def neuron_like_server(tmp_path_factory):
    pipeline = RecordingNeuronPipeline()
    backend = NeuronBackend([CompiledPipeline(pipeline, CompiledShape(batch_size=2, height=64, width=64))], SD)
    with serve(tmp_path_factory.mktemp("unused"), loader=lambda _settings: backend, ui=False) as live:
        yield live, pipeline


def test_a_request_of_another_size_is_a_422_naming_the_compiled_size(neuron_like_server):
    live, _ = neuron_like_server
    response = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a fox", "width": 128, "height": 64})
    assert response.status_code == 422
    assert "only 64x64" in response.json()["error"] and "got 128x64" in response.json()["error"]


def test_the_compiled_size_is_the_default_and_batches_are_padded(neuron_like_server):
    live, pipeline = neuron_like_server
    calls_before = len(pipeline.calls)
    response = httpx.post(f"{live.url}/v1/generate", json={"prompt": "a fox", "steps": 2})
    assert response.status_code == 200
    assert response.headers["x-backend"] == "neuron"
    call = pipeline.calls[calls_before]
    assert call["prompt"] == ["a fox", "a fox"]  # one request padded to the compiled batch of 2
    assert "width" not in call and "height" not in call  # the compiled pipeline has a fixed shape


def test_info_reports_the_compiled_shape(neuron_like_server):
    live, _ = neuron_like_server
    info = httpx.get(f"{live.url}/v1/info").json()
    assert info["backend"] == "neuron"
    assert info["compiled_shapes"] == [{"batch_size": 2, "height": 64, "width": 64}]
    assert info["batching"]["max_batch_size"] == 2  # MAX_BATCH_SIZE=4 capped by the compiled batch
    assert info["versions"]["optimum-neuron"] == "not installed"
