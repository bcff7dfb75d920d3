"""LoRA adapters through the real HTTP stack: the built-in tiny SD model on the CPU, adapters made with peft in a
temporary LORA_DIR, requests from httpx and the official openai client."""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from PIL import Image

from app.backends.selection import load_backend
from app.batching import ACROSS_BATCH_MAX_ABS, ACROSS_BATCH_MEAN_ABS
from app.models.builtin import builtin_spec
from app.models.random_pipeline import materialize
from tests.app.jobs_server import JobsServer, serve_jobs
from tests.app.lora_adapters import make_adapter
from tests.app.ui_protocol import ui_error, ui_generate

ADAPTERS = {"ink": 1, "wash": 2, "third": 3}  # name -> the seed of its random weights


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JobsServer, httpx.Client]]:
    tmp = tmp_path_factory.mktemp("loras")
    model_dir = materialize(builtin_spec("builtin:tiny"), tmp / "models")
    for name, seed in ADAPTERS.items():
        make_adapter(model_dir, tmp / "loras", name, seed)
    with (
        serve_jobs(
            tmp,
            load_backend,
            lora_dir=str(tmp / "loras"),
            max_loras=2,
            max_loaded_loras=2,
            batch_wait_ms=0.0,
            ui=True,
        ) as live,
        httpx.Client(base_url=live.url, timeout=60) as client,
    ):
        yield live, client


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def generate(client: httpx.Client, seed: int = 7, **fields: Any) -> httpx.Response:
    response = client.post("/v1/generate", json={"prompt": "a red fox", "seed": seed, **fields})
    assert response.status_code == 200, response.text
    return response


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Poll `condition` until it holds; fail after `timeout_s` (loose: the machine is shared)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the service never reached the awaited state"
        time.sleep(0.02)


def test_an_adapter_changes_the_image_and_scale_zero_gives_the_image_without_it(server):
    _live, client = server
    plain = generate(client).content
    styled = generate(client, loras=[{"name": "ink", "scale": 1.0}]).content
    assert np.abs(pixels(plain) - pixels(styled)).mean() > 5  # measured: about 40 on the 0..255 scale
    assert generate(client, loras=[{"name": "ink", "scale": 0.0}]).content == plain
    # The adapter is switched off again for a request without it.
    assert generate(client).content == plain
    # Same seed, same adapter: the same image.
    assert generate(client, loras=[{"name": "ink"}]).content == styled


@pytest.mark.parametrize(
    ("loras", "text"),
    [
        ([{"name": "nope"}], "unknown adapter 'nope'"),
        ([{"name": "ink", "scale": 2.5}], "loras.0.scale"),
        ([{"name": "ink"}, {"name": "wash"}, {"name": "third"}], "loras"),
        ([{"name": "ink"}, {"name": "ink", "scale": 0.5}], "adapter 'ink' is named more than once"),
        ([{"name": "../ink"}], "loras.0.name"),
        ([{"name": "ink", "url": "https://example.com/x.safetensors"}], "loras.0.url"),
    ],
)
def test_bad_adapters_are_4xx_naming_what_is_wrong(server, loras, text):
    _live, client = server
    response = client.post("/v1/generate", json={"prompt": "a red fox", "loras": loras})
    assert response.status_code == 422
    assert text in response.text, response.text
    images = client.post("/v1/images/generations", json={"prompt": "a red fox", "loras": loras})
    assert images.status_code == 400
    error = images.json()["error"]
    assert error["type"] == "invalid_request_error" and text in error["message"]
    assert error["param"].startswith("loras"), error


def test_requests_with_different_adapters_queued_together_each_get_their_own(server):
    live, client = server
    service = live.app.state.service
    alone = {
        name: generate(client, seed=11, loras=[{"name": name}] if name else None).content for name in ("ink", "wash")
    }
    # Hold the pipeline thread: a plain request is taken by the worker and waits there, and the three behind it
    # wait in the queue together, so the worker chooses their batches from all three.
    gate = threading.Event()
    holder = threading.Thread(target=service.run_blocking_on_pipeline_thread, args=(gate.wait,))
    holder.start()
    bodies = [
        {"prompt": "a red fox", "seed": 11, "loras": [{"name": "ink"}]},
        {"prompt": "a red fox", "seed": 12, "loras": [{"name": "wash"}]},
        {"prompt": "a red fox", "seed": 11, "loras": [{"name": "ink"}]},
    ]
    try:
        with ThreadPoolExecutor(1 + len(bodies)) as pool:
            blocker = pool.submit(client.post, "/v1/generate", json={"prompt": "first", "seed": 1})
            wait_for(lambda: service.batcher.in_flight == 1 and service.batcher.depth == 0)
            futures = [pool.submit(client.post, "/v1/generate", json=body) for body in bodies]
            wait_for(lambda: service.batcher.depth == len(bodies))
            gate.set()
            ink, wash, ink_again = (future.result() for future in futures)
            assert blocker.result().status_code == 200
    finally:
        gate.set()
        holder.join()
    for response in (ink, wash, ink_again):
        assert response.status_code == 200, response.text
    # wash never shares a batch with ink (its adapter set differs); the two ink requests share one.
    assert (wash.headers["X-Batch-Size"], ink.headers["X-Batch-Size"], ink_again.headers["X-Batch-Size"]) == (
        "1",
        "2",
        "2",
    )
    assert pixels(wash.content).tolist() != pixels(alone["wash"]).tolist()  # another seed: another image
    assert generate(client, seed=12, loras=[{"name": "wash"}]).content == wash.content
    for response in (ink, ink_again):
        difference = np.abs(pixels(response.content) - pixels(alone["ink"]))
        assert difference.max() <= ACROSS_BATCH_MAX_ABS and difference.mean() <= ACROSS_BATCH_MEAN_ABS


def test_the_least_recently_used_adapter_is_unloaded_beyond_max_loaded_loras(server):
    live, client = server
    for name in ("ink", "wash", "third"):
        generate(client, loras=[{"name": name}])
    assert client.get("/v1/info").json()["loras_loaded"] == ["wash", "third"]
    pipeline = live.app.state.service.backend.pipeline
    assert {name for names in pipeline.get_list_adapters().values() for name in names} == {"wash", "third"}
    generate(client, loras=[{"name": "wash"}])
    generate(client, loras=[{"name": "ink", "scale": 0.5}, {"name": "wash"}])
    assert client.get("/v1/info").json()["loras_loaded"] == ["ink", "wash"]
    # Reloaded after its unloading, an adapter gives the same image as before.
    first = generate(client, loras=[{"name": "third"}]).content
    generate(client, loras=[{"name": "ink"}, {"name": "wash"}])
    assert generate(client, loras=[{"name": "third"}]).content == first


def test_the_adapters_route_lists_them_with_size_and_pool(server):
    live, client = server
    listed = client.get("/v1/images/adapters")
    assert listed.status_code == 200
    body = listed.json()
    assert [entry["name"] for entry in body["data"]] == sorted(ADAPTERS)
    for entry in body["data"]:
        assert entry["size_bytes"] > 0 and entry["served"] is True and entry["fused_scale"] is None
        assert entry["backend"] == "cpu" and entry["pool"] == live.settings.deployment_unit
    assert body["max_loras"] == 2 and body["max_scale"] == live.settings.max_lora_scale


def test_the_openai_client_sends_loras_as_an_extra_body_field(server):
    live, client = server
    sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    answer = sdk.images.generate(
        prompt="a red fox", size="64x64", extra_body={"seed": 7, "loras": [{"name": "ink", "scale": 1.0}]}
    )
    png = base64.b64decode(answer.data[0].b64_json or "")
    assert pixels(png).tolist() == pixels(generate(client, loras=[{"name": "ink"}]).content).tolist()
    with pytest.raises(openai.BadRequestError, match="unknown adapter 'nope'"):
        sdk.images.generate(prompt="a red fox", extra_body={"loras": [{"name": "nope"}]})


def test_a_job_names_adapters_as_generate_does(server):
    live, client = server
    refused = client.post("/v1/jobs", json={"prompt": "a red fox", "loras": [{"name": "nope"}]})
    assert refused.status_code == 422 and "unknown adapter 'nope'" in refused.json()["error"]
    job = client.post("/v1/jobs", json={"prompt": "a red fox", "seed": 7, "loras": [{"name": "ink"}]})
    assert job.status_code == 202, job.text
    status = live.wait_for(client, job.json()["id"])
    assert status["state"] == "succeeded", status
    image = httpx.get(status["image_url"]).content
    assert pixels(image).tolist() == pixels(generate(client, loras=[{"name": "ink"}]).content).tolist()


def test_the_page_s_adapter_picker_applies_the_adapters_picked(server):
    live, client = server
    config = client.get("/config").json()
    (picker,) = [c for c in config["components"] if c.get("props", {}).get("elem_id") == "loras"]
    assert picker["props"]["choices"] == [[name, name] for name in sorted(ADAPTERS)]
    result = ui_generate(live.url, prompt="a red fox", seed=7, loras=["ink"], lora_scale=1.0)
    assert ui_error(result) is None, result
    path = result["output"]["data"][0]["path"]
    page_image = client.get(f"/gradio_api/file={path}").content
    assert pixels(page_image).tolist() == pixels(generate(client, loras=[{"name": "ink"}]).content).tolist()
    refused = ui_generate(live.url, prompt="a red fox", loras=["nope"])
    assert "unknown adapter 'nope'" in (ui_error(refused) or "")
