"""`python -m app` writes nothing but JSON lines to stderr, and what libraries print there becomes records."""

from __future__ import annotations

import json
import logging
import signal

from common.logs import StderrToLog
from tests.app.ui_protocol import ui_error, ui_generate
from tests.support.app_process import run_app


def test_every_stderr_line_is_one_json_object(tmp_path):
    env = {
        "MODEL_CACHE_DIR": str(tmp_path),
        "MAX_STEPS": "8",
        "DEFAULT_WIDTH": "64",
        "DEFAULT_HEIGHT": "64",
        "MIN_SIZE": "64",
        "MAX_SIZE": "128",
    }
    with run_app(env) as (process, url):
        assert ui_error(ui_generate(url, prompt="a fox", steps=9)).startswith("invalid request: steps")
        assert ui_error(ui_generate(url, prompt="a fox", steps=2.5)).startswith("invalid request: steps")
        assert ui_error(ui_generate(url, prompt="a fox", steps=2)) is None
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    _, stderr = process.communicate()
    records = [json.loads(line) for line in stderr.splitlines()]  # fails on any line that is not JSON
    assert any(r["message"] == "ready" for r in records)
    ui_lines = [r for r in records if r.get("path") == "ui:generate"]
    assert [r["status"] for r in ui_lines] == [422, 422, 200]
    assert len(ui_lines[0]["error_id"]) == 12


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_traceback_printed_to_stderr_becomes_one_error_record():
    # Gradio prints the tracebacks of failed events with traceback.print_exc(); since the service refuses
    # malformed UI calls before Gradio sees them, no request reaches that path, so it is driven here.
    logger = logging.getLogger("test-stderr")
    captured = _Records()
    logger.handlers[:] = [captured]
    logger.propagate = False
    stderr = StderrToLog(logger)
    stderr.write('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n')
    stderr.write("ValueError: boom\na warning line\n")
    stderr.flush()
    records = [(r.levelno, r.getMessage(), getattr(r, "traceback", None)) for r in captured.records]
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: boom'
    assert records == [(logging.ERROR, "ValueError: boom", traceback), (logging.WARNING, "a warning line", None)]
