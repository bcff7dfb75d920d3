"""A log line's time is the record's own, in UTC to the millisecond, however many lines share a second."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from common.logs import JsonFormatter


def record_at(created: float) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "t", "msg": "m", "levelno": logging.INFO, "levelname": "INFO"})
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


def test_each_line_carries_its_records_own_time_across_second_boundaries() -> None:
    formatter = JsonFormatter()
    # Seconds apart and back again, and two lines in one second: each line's time is its own.
    for created in (1_700_000_000.25, 1_700_000_000.999, 1_700_000_001.001, 1_600_000_000.5, 1_700_000_001.75):
        line = json.loads(formatter.format(record_at(created)))
        expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(created)))
        assert line["time"] == f"{expected}.{int((created - int(created)) * 1000):03d}Z"


def test_extras_that_json_cannot_encode_are_written_as_text() -> None:
    record = record_at(1_700_000_000.0)
    record.path = Path("/srv/x")
    record.skipped = None
    line = json.loads(JsonFormatter().format(record))
    assert line["path"] == "/srv/x" and "skipped" not in line
    assert (line["level"], line["logger"], line["message"]) == ("info", "t", "m")
