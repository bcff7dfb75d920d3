"""Bad input: every case is a 4xx with a readable message, and the service keeps serving."""

from __future__ import annotations

import httpx
import pytest

from tests.app.live_server import LiveServer

GOOD = {"prompt": "a red bicycle", "steps": 2}

JSON_CASES = {
    "empty prompt": {"prompt": ""},
    "blank prompt": {"prompt": "   "},
    "missing prompt": {"steps": 2},
    "over-long prompt": {"prompt": "x" * 201},
    "over-long negative prompt": {**GOOD, "negative_prompt": "x" * 201},
    "zero steps": {**GOOD, "steps": 0},
    "steps above the bound": {**GOOD, "steps": 9},
    "width not a multiple of 8": {**GOOD, "width": 100},
    "height not a multiple of 8": {**GOOD, "height": 65},
    "width below the bound": {**GOOD, "width": 56},
    "height above the bound": {**GOOD, "height": 136},
    "non-numeric guidance": {**GOOD, "guidance_scale": "high"},
    "negative guidance": {**GOOD, "guidance_scale": -1},
    "guidance above the bound": {**GOOD, "guidance_scale": 31},
    "negative seed": {**GOOD, "seed": -1},
    "seed too large": {**GOOD, "seed": 2**32},
    "steps as a string": {**GOOD, "steps": "2"},
    "steps as a float": {**GOOD, "steps": 2.5},
    "steps as a boolean": {**GOOD, "steps": True},
    "prompt as a number": {"prompt": 123},
    "prompt as a list": {"prompt": ["a", "b"]},
    "unknown field": {**GOOD, "stpes": 2},
    "a list instead of an object": ["a red bicycle"],
    "null body": None,
}

RAW_CASES = {
    "NaN guidance": ('{"prompt": "a", "steps": 2, "guidance_scale": NaN}', 422),
    "Infinity guidance": ('{"prompt": "a", "steps": 2, "guidance_scale": Infinity}', 422),
    "not JSON": ("draw me a cat", 422),
    "truncated JSON": ('{"prompt": "a', 422),
    "empty body": ("", 422),
}


@pytest.fixture(scope="module")
def client(live_service: LiveServer):
    with httpx.Client(base_url=live_service.url, timeout=60) as c:
        yield c


def assert_readable_4xx(response: httpx.Response, status: int = 422) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and len(body["error"]) > 10
    assert "Traceback" not in response.text


@pytest.mark.parametrize("body", JSON_CASES.values(), ids=JSON_CASES.keys())
def test_bad_json_body_is_a_readable_422(client, body):
    assert_readable_4xx(client.post("/v1/generate", json=body))


@pytest.mark.parametrize(("raw", "status"), RAW_CASES.values(), ids=RAW_CASES.keys())
def test_malformed_body_is_a_readable_4xx(client, raw, status):
    response = client.post("/v1/generate", content=raw, headers={"Content-Type": "application/json"})
    assert_readable_4xx(response, status)


def test_the_message_names_the_field(client):
    body = client.post("/v1/generate", json={**GOOD, "steps": 0}).json()
    assert "steps" in body["error"]
    assert body["detail"][0]["field"] == "steps"


def test_huge_body_is_a_413(client):
    response = client.post("/v1/generate", json={"prompt": "x" * 100_000})
    assert_readable_4xx(response, 413)


def test_huge_chunked_body_is_a_413(client):
    def chunks():
        yield b'{"prompt": "'
        for _ in range(50):
            yield b"x" * 1000
        yield b'"}'

    response = client.post("/v1/generate", content=chunks(), headers={"Content-Type": "application/json"})
    assert_readable_4xx(response, 413)


def test_wrong_method_and_unknown_api_path_are_4xx(client):
    # The UI is mounted at /, so it answers paths the API does not have; either way a 4xx.
    assert client.get("/v1/generate").status_code in (404, 405)
    assert client.get("/v1/nothing-here").status_code == 404


def test_service_keeps_serving_after_bad_input(client):
    for body in JSON_CASES.values():
        client.post("/v1/generate", json=body)
    response = client.post("/v1/generate", json=GOOD)
    assert response.status_code == 200
    assert client.get("/readiness").status_code == 200
