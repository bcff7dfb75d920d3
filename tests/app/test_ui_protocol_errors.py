"""Malformed UI calls (no function number, too few values) are a 422 in the API's error shape, not a 500
or a bare "Error", through the real HTTP stack."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.app.ui_protocol import generate_dependency


def _assert_422(response: httpx.Response, field: str, words: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert words in body["error"]
    assert [d["field"] for d in body["detail"]] == [field]
    assert words in body["detail"][0]["message"]


@pytest.mark.parametrize("body", [{"data": ["a fox"]}, {"data": ["a fox"], "fn_index": None}], ids=["missing", "null"])
@pytest.mark.parametrize("path", ["/gradio_api/run/predict", "/gradio_api/queue/join"])
def test_a_call_without_a_function_number_is_a_422(held_service, path: str, body: dict):
    live, _backend = held_service
    response = httpx.post(live.url + path, json={**body, "session_hash": uuid.uuid4().hex}, timeout=10)
    _assert_422(response, "fn_index", "required")


def test_a_ui_request_with_3_of_its_9_values_is_a_422_naming_them(held_service):
    live, _backend = held_service
    dependency = generate_dependency(live.url)
    body = {
        "data": ["a fox", "", 2],
        "fn_index": dependency["id"],
        "trigger_id": dependency["targets"][0][0],
        "session_hash": uuid.uuid4().hex,
    }
    response = httpx.post(live.url + "/gradio_api/queue/join", json=body, timeout=10)
    _assert_422(response, "data", "9 values expected (Prompt, Negative prompt, Steps, Guidance, Width, Height")
    assert "got 3" in response.json()["error"]
