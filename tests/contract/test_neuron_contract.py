"""The Neuron contract: what the Neuron backend and the compile job call exists in the Neuron image's
optimum-neuron, and the service runs on that image's diffusers/transformers line.

The checks run inside a venv of the Neuron image's Python with its lock's packages (built once and
cached, see neuron_venv.py); this module starts them and turns their results into test results.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.models.builtin import builtin_spec
from app.models.random_pipeline import materialize
from tests.contract.neuron_checks import EXPORTS, MODELS_ENV, MODES
from tests.contract.neuron_venv import NoInterpreter, ensure_venv, venv_python
from tests.support.app_process import run_app
from tools.image_locks import REPO_ROOT, image_lock_specs, read_lock

CHECK_TIMEOUT_S = 600
CHECK_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


@pytest.fixture(scope="module")
def neuron_python() -> Path:
    """The contract venv's interpreter (built on first use; minutes once, then cached)."""
    try:
        return venv_python(ensure_venv())
    except NoInterpreter as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def check_results(neuron_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Every check's result, from one run per mode inside the venv."""
    results: dict[str, dict[str, object]] = {}
    out_dir = tmp_path_factory.mktemp("neuron-contract")
    models = out_dir / "models"
    for model_id, _ in EXPORTS.values():  # saved as folders here (neuron_checks.MODELS_ENV says why)
        materialize(builtin_spec(model_id), models)
    for mode in MODES:
        out = out_dir / f"{mode}.json"
        run = subprocess.run(
            [str(neuron_python), "-m", "tests.contract.neuron_checks", mode, str(out)],
            cwd=REPO_ROOT,
            env={**os.environ, **CHECK_ENV, MODELS_ENV: str(models)},
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
        assert run.returncode == 0 and out.is_file(), run.stdout[-4000:] + run.stderr[-4000:]
        results.update(json.loads(out.read_text(encoding="utf-8")))
    return results


@pytest.mark.parametrize("check", [check.__name__ for checks in MODES.values() for check in checks])
def test_neuron_contract(check_results, check):
    result = check_results[check]
    assert result["ok"], result["detail"]


@pytest.fixture(scope="module")
def neuron_line_service(
    neuron_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """`python -m app` on the CPU with the built-in model, in the contract venv, on a free loopback port."""
    log = tmp_path_factory.mktemp("neuron-line-service") / "service.log"
    env = {
        **CHECK_ENV,
        "MODEL_ID": "builtin:tiny",
        "MODEL_CACHE_DIR": str(log.parent / "models"),
        "METRICS": "off",
        "DEFAULT_WIDTH": "64",
        "DEFAULT_HEIGHT": "64",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    with run_app(env, python=str(neuron_python), log=log) as (process, url):
        yield url, process, log


def test_service_serves_on_the_neuron_images_diffusers_and_transformers_and_drains(neuron_line_service):
    url, process, log = neuron_line_service
    pins = read_lock(image_lock_specs()["neuron"].lock_file).pins
    info = httpx.get(f"{url}/v1/info", timeout=10).json()
    assert info["backend"] == "cpu" and info["versions"]["diffusers"] == str(pins["diffusers"])
    response = httpx.post(f"{url}/v1/generate", json={"prompt": "a red fox", "seed": 3}, timeout=120)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png" and response.content.startswith(b"\x89PNG")
    assert response.headers["x-seed"] == "3"
    bad = httpx.post(f"{url}/v1/generate", json={"prompt": "a red fox", "steps": 0}, timeout=30)
    assert bad.status_code == 422 and "steps" in bad.text
    ui = httpx.get(f"{url}/", timeout=30)
    assert ui.status_code == 200 and "gradio" in ui.text.lower()
    # The drain runs on SIGTERM (the Neuron image's entrypoint now lets it reach the service).
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean stop
    assert '"message": "draining"' in log.read_text() and "Application shutdown complete" in log.read_text()
