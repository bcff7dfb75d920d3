"""Schemathesis against the jobs routes of the OpenAPI schema: no generated input may cause a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import serve_jobs


@pytest.fixture(scope="module")
def jobs_url(tmp_path_factory):
    backend = FakeBackend()
    with serve_jobs(tmp_path_factory.mktemp("jobs-fuzz"), lambda _s: backend) as live:
        yield live.url


def _operations(url: str) -> dict:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return {op.label: op for op in (result.ok() for result in schema.get_all_operations())}


def test_the_schema_covers_the_jobs_routes(jobs_url):
    assert {"POST /v1/jobs", "GET /v1/jobs/{job_id}", "GET /v1/jobs/{job_id}/image"} <= set(_operations(jobs_url))


CASES = [
    ("POST /v1/jobs", GenerationMode.POSITIVE, 20),
    ("POST /v1/jobs", GenerationMode.NEGATIVE, 30),
    ("GET /v1/jobs/{job_id}", GenerationMode.POSITIVE, 15),
    ("GET /v1/jobs/{job_id}/image", GenerationMode.POSITIVE, 15),
    ("GET /v1/jobs/{job_id}/image", GenerationMode.NEGATIVE, 15),
]


@pytest.mark.parametrize(("label", "mode", "examples"), CASES, ids=[f"{c[0]} {c[1].value}" for c in CASES])
def test_no_generated_input_causes_a_server_error(jobs_url, label: str, mode: GenerationMode, examples: int):
    operation = _operations(jobs_url)[label]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def call(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[not_a_server_error], timeout=60)

    call()
