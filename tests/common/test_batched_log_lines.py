"""Records logged in a batch (the gateway's per-request lines of streams that ended together) reach the log as the
same JSON lines, in order, with one write when the batch ends; outside a batch each line is written as it comes."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from common.logs import JsonFormatter, JsonLinesHandler, batched_log_lines


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
