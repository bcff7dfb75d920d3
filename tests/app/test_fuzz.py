"""Schemathesis against the service's own OpenAPI schema.

Two runs: the CLI in its default mode with every check, as an outsider would run it, against the whole
app (jobs and UI on, production body limit, a stand-in pipeline so that hundreds of cases take seconds);
and the pytest integration against the real built-in model, where no generated input may cause a 5xx.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import JobsServer, serve_jobs
from tests.app.live_server import LiveServer

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_EXAMPLES = 50  # per operation and phase: about 10 s on two cores


def _operations(url: str) -> list:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_the_schema_covers_the_api(live_service: LiveServer):
    labels = {operation.label for operation in _operations(live_service.url)}
    assert labels >= {
        "POST /v1/generate",
        "POST /v1/images/generations",
        "GET /v1/info",
        "GET /health",
        "GET /readiness",
    }


CASES = [
    ("POST /v1/generate", GenerationMode.POSITIVE, 15),  # valid bodies: images are generated
    ("POST /v1/generate", GenerationMode.NEGATIVE, 40),  # bodies that break the schema: all 4xx
    ("POST /v1/images/generations", GenerationMode.POSITIVE, 10),
    ("POST /v1/images/generations", GenerationMode.NEGATIVE, 30),
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


@pytest.fixture(scope="module")
def whole_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsServer]:
    """Every route of a production pod (API, jobs, UI), its default body limit, a quick stand-in model."""
    with serve_jobs(
        tmp_path_factory.mktemp("schemathesis"), lambda _s: FakeBackend(), ui=True, max_body_bytes=64 * 1024
    ) as live:
        yield live


def test_schemathesis_cli_with_all_checks_finds_nothing(whole_app: JobsServer, tmp_path: Path):
    config = REPO_ROOT / "tests" / "support" / "schemathesis.toml"  # an edit's images: see its comments
    command = [SCHEMATHESIS, "--config-file", str(config), "run", f"{whole_app.url}/openapi.json"]
    command += ["--checks", "all", "-n", str(MAX_EXAMPLES)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # the config's hooks module
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    # Exit status 0: no check failed (a warning, such as "image links need a signature it cannot
    # forge", does not count); 1 lists each failure with a curl line to reproduce it.
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "Tested: 12" in run.stdout  # every operation: jobs, the Images API, its edits and adapters included


def test_an_integral_float_is_an_integer_as_the_schema_says(whole_app: JobsServer):
    # JSON Schema's "integer" includes 6.0, and schemathesis sends it as valid input.
    response = httpx.post(f"{whole_app.url}/v1/generate", json={"prompt": "a fox", "steps": 2.0, "width": 72.0})
    assert response.status_code == 200, response.text
    assert response.headers["X-Seed"]


def test_a_body_that_is_not_utf8_is_the_documented_422(whole_app: JobsServer):
    response = httpx.post(
        f"{whole_app.url}/v1/generate", content=b'{"prompt": "\xff"}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["error"] == "invalid request: body: the body is not valid JSON (not UTF-8 text)"


def test_an_image_link_with_a_non_ascii_signature_is_refused_not_a_500(whole_app: JobsServer):
    response = httpx.get(
        f"{whole_app.url}/v1/jobs/{'0' * 32}/image", params={"expires": 2**40, "signature": "الكل في المجموعة"}
    )
    assert response.status_code == 403
    assert response.json()["error"].startswith("the image link is invalid or has expired")
