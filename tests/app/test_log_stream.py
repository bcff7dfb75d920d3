"""`python -m app` writes nothing but JSON lines to stderr, even when Gradio prints a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.app.test_shutdown import ROOT, free_port, wait_ready
from tests.app.ui_protocol import ui_error, ui_generate


def test_every_stderr_line_is_one_json_object_with_gradio_errors_among_them(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "BACKEND": "cpu",
        "MODEL_CACHE_DIR": str(tmp_path),
        "DEFAULT_STEPS": "2",
        "MAX_STEPS": "8",
        "DEFAULT_WIDTH": "64",
        "DEFAULT_HEIGHT": "64",
        "MIN_SIZE": "64",
        "MAX_SIZE": "128",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        # Above the slider's maximum: Gradio itself refuses it and prints a traceback to stderr.
        assert ui_error(ui_generate(url, prompt="a fox", steps=9)) is not None
        assert ui_error(ui_generate(url, prompt="a fox", steps=2.5)).startswith("invalid request: steps")
        assert ui_error(ui_generate(url, prompt="a fox", steps=2)) is None
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    _, stderr = process.communicate()
    records = [json.loads(line) for line in stderr.splitlines()]  # fails on any line that is not JSON
    assert any(r["message"] == "ready" for r in records)
    assert any(r["logger"] == "stderr" and "Traceback" in r.get("traceback", "") for r in records)
    ui_lines = [r for r in records if r.get("path") == "ui:generate"]
    assert [r["status"] for r in ui_lines] == [422, 200]
    assert len(ui_lines[0]["error_id"]) == 12
