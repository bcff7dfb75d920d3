"""`python -m app` writes nothing but JSON lines to stderr, even when Gradio prints a traceback."""

from __future__ import annotations

import json
import signal

from tests.app.ui_protocol import ui_error, ui_generate
from tests.support.app_process import run_app


def test_every_stderr_line_is_one_json_object_with_gradio_errors_among_them(tmp_path):
    env = {
        "MODEL_CACHE_DIR": str(tmp_path),
        "MAX_STEPS": "8",
        "DEFAULT_WIDTH": "64",
        "DEFAULT_HEIGHT": "64",
        "MIN_SIZE": "64",
        "MAX_SIZE": "128",
    }
    with run_app(env) as (process, url):
        # Fewer values than the event has inputs: Gradio itself refuses it and prints a traceback to stderr.
        assert ui_generate(url, raw_data=["a fox"])["success"] is False
        assert ui_error(ui_generate(url, prompt="a fox", steps=9)).startswith("invalid request: steps")
        assert ui_error(ui_generate(url, prompt="a fox", steps=2.5)).startswith("invalid request: steps")
        assert ui_error(ui_generate(url, prompt="a fox", steps=2)) is None
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    _, stderr = process.communicate()
    records = [json.loads(line) for line in stderr.splitlines()]  # fails on any line that is not JSON
    assert any(r["message"] == "ready" for r in records)
    assert any(r["logger"] == "stderr" and "Traceback" in r.get("traceback", "") for r in records)
    ui_lines = [r for r in records if r.get("path") == "ui:generate"]
    assert [r["status"] for r in ui_lines] == [422, 422, 200]
    assert len(ui_lines[0]["error_id"]) == 12
