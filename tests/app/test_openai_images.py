"""POST /v1/images/generations through the official `openai` client and raw HTTP, against the real server
with the built-in model (tests/conftest.py `live_service`, jobs off) and a server with the local jobs store
(the `url` answers)."""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import openai
import pytest
from PIL import Image

from app.backends.selection import load_backend
from tests.app import held
from tests.app.jobs_server import JobsServer, serve_jobs
from tests.app.live_server import LiveServer

PATH = "/v1/images/generations"


def sdk(url: str) -> openai.OpenAI:
    # No retries: a 429 or 503 must show here, not be retried away.
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused-without-sign-in", max_retries=0, timeout=120)


def png(b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert image.format == "PNG"
    return image


@pytest.fixture
def client(live_service: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_service.url, timeout=120) as c:
        yield c


def test_the_sdk_gets_a_png_of_the_asked_size(live_service):
    answer = sdk(live_service.url).images.generate(
        prompt="a lighthouse at dusk", size="64x128", response_format="b64_json", extra_body={"steps": 2}
    )
    assert abs(answer.created - time.time()) < 120
    assert answer.data is not None and len(answer.data) == 1
    assert png(answer.data[0].b64_json).size == (64, 128)
    assert answer.size == "64x128" and answer.output_format == "png" and answer.usage is None


def test_the_sdk_names_the_served_model_and_auto_size(live_service):
    model = httpx.get(f"{live_service.url}/v1/info").json()["model"]
    answer = sdk(live_service.url).images.generate(prompt="a fox", model=model, size="auto", n=1, quality="auto")
    assert png(answer.data[0].b64_json).size == (64, 64)  # TEST_SETTINGS' default size


def test_n_images_come_from_one_batch_with_consecutive_seeds(live_service):
    raw = sdk(live_service.url).images.with_raw_response.generate(
        prompt="two foxes", n=2, size="64x64", response_format="b64_json", extra_body={"seed": 11, "steps": 2}
    )
    assert raw.headers["x-batch-size"] == "2,2"  # both images rode one pipeline call of 2
    assert raw.headers["x-seed"] == "11"
    answer = raw.parse()
    first, second = (png(item.b64_json) for item in answer.data)
    assert first.size == second.size == (64, 64)
    assert first.tobytes() != second.tobytes()  # seeds 11 and 12, not one image twice
    # Seed 12 alone draws the second image (batching changes at most a rounding step: app/batching.py).
    alone = sdk(live_service.url).images.generate(prompt="two foxes", extra_body={"seed": 12, "steps": 2})
    diff = [abs(a - b) for a, b in zip(png(alone.data[0].b64_json).tobytes(), second.tobytes(), strict=True)]
    assert max(diff) <= 2


def test_an_impossible_size_raises_bad_request_with_a_readable_message(live_service):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_service.url).images.generate(prompt="a fox", size="4096x4096")
    error = caught.value
    assert error.status_code == 400 and error.param == "size" and error.type == "invalid_request_error"
    assert "size 4096x4096 cannot be served" in str(error) and "between 64 and 128" in str(error)


@pytest.mark.parametrize(
    ("options", "param", "text"),
    [
        ({"size": "big"}, "size", "WIDTHxHEIGHT"),
        ({"size": "1024x1792"}, "size", "cannot be served"),
        ({"model": "dall-e-3"}, "model", "not served here"),
        ({"style": "vivid"}, "style", "describe the style in the prompt"),
        ({"quality": "hd"}, "quality", "steps"),
        ({"output_format": "jpeg"}, "output_format", "PNG"),
        ({"background": "transparent"}, "background", "opaque"),
        ({"n": 9}, "n", "less than or equal to 8"),  # QUEUE_SIZE=8 in TEST_SETTINGS
        ({"n": 0}, "n", "greater than or equal to 1"),
        ({"response_format": "url"}, "response_format", "JOBS=off"),
    ],
)
def test_what_the_service_cannot_do_is_a_bad_request_naming_the_field(live_service, options, param, text):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_service.url).images.generate(prompt="a fox", **options)
    assert caught.value.param == param
    assert text in caught.value.message


def test_streaming_is_refused_clearly(live_service):
    with pytest.raises(openai.BadRequestError, match="streaming is not offered"):
        sdk(live_service.url).images.generate(prompt="a fox", stream=True)


@pytest.mark.parametrize(
    ("content", "param", "text"),
    [
        (b"{not json", "body", "not valid JSON"),
        (b"[1, 2]", "body", "should be an object"),
        (b'{"size": "64x64"}', "prompt", "Field required"),
        (b'{"prompt": "   "}', "prompt", "prompt must not be empty"),
        (b'{"prompt": "a", "colour": "red"}', "colour", "Extra inputs are not permitted"),
        (b'{"prompt": "a", "n": "2"}', "n", "valid integer"),
        (b'{"prompt": "a", "n": 1.5}', "n", "valid integer"),
        (b'{"prompt": "a", "stream": 0}', "stream", "streaming"),
        (b'{"prompt": "a", "svg": {"model": "x"}}', "svg", "SVG output is not offered"),
    ],
)
def test_malformed_bodies_get_openai_shaped_400s(client, content, param, text):
    response = client.post(PATH, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert text in error["message"]


def test_wrong_method_and_large_body_answer_in_openai_shape(client, live_service):
    wrong = client.get(PATH)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert "not allowed" in wrong.json()["error"]["message"]
    too_big = client.post(PATH, json={"prompt": "x" * (live_service.settings.max_body_bytes + 1)})
    assert too_big.status_code == 413
    assert "larger than" in too_big.json()["error"]["message"]


def test_each_image_counts_in_images_generated(live_service, monkeypatch):
    metrics = live_service.service.metrics
    finished: list[tuple[int, int]] = []
    real = metrics.request_finished

    def spy(status: int, latency_ms: float, images: int) -> None:
        finished.append((status, images))
        real(status, latency_ms, images)

    monkeypatch.setattr(metrics, "request_finished", spy)
    sdk(live_service.url).images.generate(prompt="three foxes", n=3, extra_body={"steps": 1})
    with pytest.raises(openai.BadRequestError):
        sdk(live_service.url).images.generate(prompt="a fox", size="8x8")
    assert finished == [(200, 3), (400, 0)]


@pytest.fixture(scope="module")
def with_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsServer]:
    """The built-in model with the local jobs store, whose signed links serve `url` answers."""
    with serve_jobs(tmp_path_factory.mktemp("images-url"), load_backend, jobs_url_ttl_s=60) as server:
        yield server


def test_url_answers_are_signed_links_that_work_without_a_token_and_expire(with_store):
    answer = sdk(with_store.url).images.generate(prompt="a fox", n=2, response_format="url", extra_body={"steps": 1})
    links = [item.url for item in answer.data]
    assert len(set(links)) == 2 and all(item.b64_json is None for item in answer.data)
    for link in links:
        fetched = httpx.get(link, timeout=30)
        assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(fetched.content)).size == (64, 64)
    parts = urlsplit(links[0])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert int(query["expires"]) <= time.time() + 60  # JOBS_URL_TTL_S
    image_id = Path(parts.path).parent.name
    assert len(image_id) == 32  # a random 128-bit id, as a job's
    forged = f"{parts.scheme}://{parts.netloc}{parts.path}?" + urlencode(
        {**query, "expires": int(query["expires"]) + 3600}
    )
    assert httpx.get(forged, timeout=30).status_code == 403  # a later expiry breaks the signature
    tampered = f"{parts.scheme}://{parts.netloc}{parts.path}?" + urlencode({**query, "signature": "0" * 64})
    assert httpx.get(tampered, timeout=30).status_code == 403


def test_seeds_of_a_group_wrap_inside_the_seed_range(client):
    top = 2**32 - 1
    response = client.post(PATH, json={"prompt": "a fox", "n": 2, "seed": top, "steps": 1})
    assert response.status_code == 200, response.text
    assert response.headers["x-seed"] == str(top)
    second = png(response.json()["data"][1]["b64_json"])
    alone = client.post(PATH, json={"prompt": "a fox", "seed": 0, "steps": 1}).json()["data"][0]["b64_json"]
    diff = [abs(a - b) for a, b in zip(png(alone).tobytes(), second.tobytes(), strict=True)]
    assert max(diff) <= 2  # image 2 drew with seed 0


def test_a_group_the_queue_cannot_take_whole_is_a_rate_limit_error(held_service):
    live, backend = held_service
    blocker = held.hold_the_pipeline(live, backend)
    parked = held.post_and_leave_open(live.url, "parked")  # one queued: 3 of QUEUE_SIZE=4 left
    try:
        held.wait_until(lambda: live.service.batcher.depth == 1)
        with pytest.raises(openai.RateLimitError) as caught:
            sdk(live.url).images.generate(prompt="four foxes", n=4)
        assert caught.value.response.headers["retry-after"] == "1"
        assert "queue is full" in caught.value.message
        assert live.service.batcher.depth == 1  # nothing of the group was queued
    finally:
        held.finish(blocker, backend)
        parked.settimeout(30)
        parked.recv(65536)
        parked.close()


def test_a_result_store_that_fails_is_a_503_with_an_error_id(with_store, monkeypatch):
    store = with_store.app.state.jobs.service.store

    def full(_image_id: str, _png: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "put_image", full)
    with pytest.raises(openai.InternalServerError) as caught:
        sdk(with_store.url).images.generate(prompt="a fox", response_format="url", extra_body={"steps": 1})
    assert caught.value.status_code == 503
    assert "result store is unavailable" in caught.value.message and "error id" in caught.value.message
    # b64_json needs no store
    answer = sdk(with_store.url).images.generate(prompt="a fox", extra_body={"steps": 1})
    assert png(answer.data[0].b64_json).size == (64, 64)
