"""Records logged in a batch (the gateway's per-request lines of streams that ended together) reach the log as the
same JSON lines, in order, with one write when the batch ends; outside a batch each line is written as it comes."""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.logs import JsonFormatter, JsonLinesHandler, batched_log_lines, info_fields


class Writes(io.StringIO):
    """A text stream that remembers each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


@pytest.fixture
def stream() -> Iterator[Writes]:
    """The root logger writing JSON lines to a Writes, as configure_logging sets it up on stderr."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    writes = Writes()
    handler = JsonLinesHandler(writes)
    handler.setFormatter(JsonFormatter())
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    try:
        yield writes
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


def test_a_batch_is_written_once_when_it_ends_in_order(stream: Writes) -> None:
    log = logging.getLogger("gateway-test")
    log.info("before")
    assert len(stream.writes) == 1
    with batched_log_lines():
        for n in range(3):
            log.info("request", extra={"n": n})
        with batched_log_lines():  # a batch inside a batch: the outer one writes
            log.warning("inner")
        assert len(stream.writes) == 1  # held
    assert len(stream.writes) == 2
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(r["message"], r.get("n")) for r in lines] == [
        ("before", None),
        ("request", 0),
        ("request", 1),
        ("request", 2),
        ("inner", None),
    ]
    log.info("after")  # written at once again
    assert len(stream.writes) == 3


def test_a_batch_that_raises_still_writes_what_it_held(stream: Writes) -> None:
    log = logging.getLogger("gateway-test")
    with pytest.raises(RuntimeError), batched_log_lines():
        log.info("kept")
        raise RuntimeError("bookkeeping failed")
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["kept"]


def test_another_threads_records_are_written_as_they_come_during_a_batch(stream: Writes) -> None:
    log = logging.getLogger("gateway-test")
    with batched_log_lines():
        log.info("held")
        other = threading.Thread(target=lambda: log.info("from another thread"))
        other.start()
        other.join()
        assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["from another thread"]
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["from another thread", "held"]


def test_without_the_json_handler_records_are_written_as_they_come(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO), batched_log_lines():
        logging.getLogger("gateway-test").info("now")
        assert [r.getMessage() for r in caplog.records] == ["now"]


@pytest.fixture
def request_log() -> Iterator[tuple[logging.Logger, Writes, list[logging.LogRecord]]]:
    """A logger whose records only a JsonLinesHandler writes (as the root's are after configure_logging), its
    stream, and every LogRecord made meanwhile."""
    log = logging.Logger("gateway-test.requests", logging.INFO)  # out of the tree, where pytest adds its capture
    writes = Writes()
    handler = JsonLinesHandler(writes)
    handler.setFormatter(JsonFormatter())
    log.addHandler(handler)
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counted(*args: object, **kwargs: object) -> logging.LogRecord:
        made.append(factory(*args, **kwargs))
        return made[-1]

    logging.setLogRecordFactory(counted)
    try:
        yield log, writes, made
    finally:
        logging.setLogRecordFactory(factory)


def test_the_request_line_without_a_log_record_is_the_line_logging_writes(
    request_log: tuple[logging.Logger, Writes, list[logging.LogRecord]],
) -> None:
    # The gateway's per-request line skips the LogRecord where only configure_logging's handler would write it;
    # what lands in the log is the same line, time aside, batched or not.
    log, stream, made = request_log
    fields = {"event": "llm_request", "status": 200, "ttft_ms": None, "path": Path("/v1/completions"), "n": 1.5}
    log.info("request", extra=dict(fields))
    assert len(made) == 1
    info_fields(log, "request", fields)
    with log.handlers[0].batch():  # type: ignore[attr-defined]
        info_fields(log, "request", fields)
        assert len(stream.writes) == 2  # held until the batch ends
    child = logging.Logger("gateway-test.requests", logging.NOTSET)  # a module's logger, its handler its parent's
    child.parent = log
    info_fields(child, "request", fields)
    assert len(made) == 1  # no record for any of the three
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 4
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line.pop("time"))
    expected = {
        "level": "info",
        "logger": "gateway-test.requests",
        "message": "request",
        "event": "llm_request",
        "status": 200,
        "path": "/v1/completions",
        "n": 1.5,
    }
    assert lines == [expected] * 4


@pytest.mark.parametrize(
    "setup",
    [
        "another handler",
        "another JSON handler",
        "a filter",
        "a handler's filter",
        "a level above info",
        "a handler's level above info",
        "the logger disabled",
    ],
)
def test_the_request_line_goes_through_logging_where_logging_would_treat_it_otherwise(
    request_log: tuple[logging.Logger, Writes, list[logging.LogRecord]], setup: str
) -> None:
    log, stream, made = request_log
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    other = Writes()
    if setup == "another handler":
        log.addHandler(Keep())
    elif setup == "another JSON handler":
        log.addHandler(JsonLinesHandler(other))
        log.handlers[-1].setFormatter(JsonFormatter())
    elif setup == "a filter":
        log.addFilter(lambda record: False)
    elif setup == "a handler's filter":
        log.handlers[0].addFilter(lambda record: False)
    elif setup == "a level above info":
        log.setLevel(logging.WARNING)
    elif setup == "a handler's level above info":
        log.handlers[0].setLevel(logging.WARNING)
    else:
        log.disabled = True
    info_fields(log, "request", {"status": 200})
    if setup.startswith("another"):
        assert json.loads(stream.getvalue())["status"] == 200
        assert [r.status for r in seen] == [200] or json.loads(other.getvalue())["status"] == 200  # type: ignore[attr-defined]
    else:
        assert stream.getvalue() == ""
        assert made == [] or "filter" in setup or "handler's" in setup  # logging makes the record a handler drops
