"""A service that cannot start says why in one line (exit 2); one whose model failed to load says so."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.bench.inprocess import serve_in_thread
from app.server import create_app
from app.settings import Settings, load_settings
from common.server_process import free_port
from tests.app.live_server import TEST_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def run_app_until_exit(env: dict[str, str], wrapper: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m app` with `env` on a free loopback port (the check under test comes after the port's), to its end."""
    command = [*(wrapper or []), sys.executable, "-m", "app"]
    env = {"PATH": "/usr/bin:/bin", "HOST": "127.0.0.1", "PORT": str(free_port()), **env}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], jobs_dir: Path) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: JOBS_DIR={jobs_dir} cannot keep jobs (")
    assert line.endswith("point JOBS_DIR at a writable directory, or set JOBS=off")


def test_a_jobs_dir_under_a_file_exits_2_with_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    jobs_dir = tmp_path / "file" / "jobs"
    result = run_app_until_exit({"UI": "false", "MODEL_CACHE_DIR": str(tmp_path), "JOBS_DIR": str(jobs_dir)})
    assert_one_line_exit_2(result, jobs_dir)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (Debian's bwrap) for a read-only mount")
def test_a_read_only_jobs_dir_exits_2_with_one_line(tmp_path):
    jobs_dir = tmp_path / "jobs"
    jobs_dir.mkdir()
    read_only = [
        "bwrap",
        "--bind",
        "/",
        "/",
        "--ro-bind",
        str(jobs_dir),
        str(jobs_dir),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    result = run_app_until_exit(
        {"UI": "false", "MODEL_CACHE_DIR": str(tmp_path), "JOBS_DIR": str(jobs_dir)}, wrapper=read_only
    )
    assert_one_line_exit_2(result, jobs_dir)


def failing_loader(_settings: Settings):
    raise OSError("the model files are unreadable")


def test_after_a_failed_model_load_generate_says_so_instead_of_still_loading(tmp_path):
    settings = load_settings(**{**TEST_SETTINGS, "model_cache_dir": tmp_path})
    app = create_app(settings, failing_loader)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        deadline = time.monotonic() + 30
        while (readiness := client.get("/readiness").json())["status"] != "load failed":
            assert time.monotonic() < deadline, readiness
            time.sleep(0.05)
        response = client.post("/v1/generate", json={"prompt": "a fox", "steps": 1})
    assert response.status_code == 503
    message = response.json()["error"]
    assert "failed to load" in message and readiness["error_id"] in message
    assert "still loading" not in message and "unreadable" not in message  # the cause stays in the log
