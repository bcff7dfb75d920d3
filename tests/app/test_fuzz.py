"""Schemathesis against the service's own OpenAPI schema: no generated input may cause a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from tests.app.live_server import LiveServer


def _operations(url: str) -> list:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_the_schema_covers_the_api(live_service: LiveServer):
    labels = {operation.label for operation in _operations(live_service.url)}
    assert labels >= {"POST /v1/generate", "GET /v1/info", "GET /health", "GET /readiness"}


CASES = [
    ("POST /v1/generate", GenerationMode.POSITIVE, 30),  # valid bodies: images are generated
    ("POST /v1/generate", GenerationMode.NEGATIVE, 40),  # bodies that break the schema: all 4xx
    ("GET /v1/info", GenerationMode.POSITIVE, 5),
    ("GET /health", GenerationMode.POSITIVE, 5),
    ("GET /readiness", GenerationMode.POSITIVE, 5),
]


@pytest.mark.parametrize(("label", "mode", "examples"), CASES, ids=[f"{c[0]} {c[1].value}" for c in CASES])
def test_no_generated_input_causes_a_server_error(
    live_service: LiveServer, label: str, mode: GenerationMode, examples: int
):
    (operation,) = [op for op in _operations(live_service.url) if op.label == label]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def call(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[not_a_server_error], timeout=60)

    call()
    assert live_service.service.ready
