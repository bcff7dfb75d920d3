"""Structured logs: one JSON object per line, with any `extra={...}` fields as top-level keys."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_STANDARD.add("color_message")  # uvicorn's ANSI-coloured copy of the message


class JsonFormatter(logging.Formatter):
    """Format a record as a JSON line: time, level, logger, message, extras, and the traceback if any.

    A busy server logs a line per request: the encoder is made once (json.dumps with `default` makes one per call)
    and the time's seconds are formatted once per second."""

    def __init__(self) -> None:
        super().__init__()
        self._encode = json.JSONEncoder(default=str).encode
        self._second: tuple[int, str] = (-1, "")  # one attribute: threads read the second and its text together

    def _time(self, created: float, msecs: float) -> str:
        second, text = self._second
        if int(created) != second:
            second = int(created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{int(msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        """The JSON line for `record`."""
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if record.exc_info:
            fields["traceback"] = self.formatException(record.exc_info)
        return self.line(record.created, record.msecs, record.levelname, record.name, record.getMessage(), fields)

    def line(
        self, created: float, msecs: float, level: str, logger: str, message: str, fields: Mapping[str, object]
    ) -> str:
        """The JSON line of a record made at `created` (`msecs` its milliseconds) with these extra `fields` (None
        values left out)."""
        entry: dict[str, object] = {
            "time": self._time(created, msecs),
            "level": level.lower(),
            "logger": logger,
            "message": message,
        }
        entry.update({k: v for k, v in fields.items() if v is not None})
        return self._encode(entry)


class JsonLinesHandler(logging.StreamHandler):
    """A StreamHandler whose records, inside `batch()`, are held and written together, with one write when the
    batch ends (otherwise each record is written and flushed as it comes, as StreamHandler does). Only the records
    of the thread that opened the batch are held: another thread's are written as they come."""

    def __init__(self, stream: io.TextIOBase) -> None:
        super().__init__(stream)
        self._held: list[str] = []
        self._batching: int | None = None  # the thread whose batch is open

    def emit(self, record: logging.LogRecord) -> None:
        """Write `record`'s line now, or hold it until the batch ends."""
        if self._batching != threading.get_ident():
            super().emit(record)
            return
        try:
            self._held.append(self.format(record) + self.terminator)
        except Exception:  # logging's rule: a record that cannot be written never raises
            self.handleError(record)

    def write_line(self, line: str) -> None:
        """Write a line formatted already (see `info_fields`) as `emit` writes a record's."""
        if self._batching == threading.get_ident():
            self._held.append(line + self.terminator)
            return
        self._write_now(line + self.terminator, line)

    def _write_now(self, text: str, what: str) -> None:
        """Write and flush `text` under the handler's lock; as emit, a failure is reported (as `what`), never raised."""
        self.acquire()
        try:
            self.stream.write(text)
            self.flush()
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": what}))
        finally:
            self.release()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold this thread's records logged within; write them in one go at the end (also when the block raises).
        While another thread's batch is open, this one's records are written as they come."""
        self.acquire()
        try:
            opened = self._batching is None  # else open already (the outer batch writes them), or another thread's
            if opened:
                self._batching = threading.get_ident()
        finally:
            self.release()
        if not opened:
            yield
            return
        try:
            yield
        finally:
            lines, self._held = self._held, []
            self._batching = None
            if lines:
                self._write_now("".join(lines), "batched log lines")


def info_fields(logger: logging.Logger, message: str, fields: Mapping[str, object]) -> None:
    """`logger.info(message, extra=fields)`, for the line a busy server writes per request.

    When the record would reach configure_logging's handler and nothing else (no other handler, no filter on its way),
    the line is formatted from `fields` straight away: a LogRecord, and the handler chain that passes it along, cost
    the gateway more than half of its request line. Otherwise (a test's capture handler, say) it is logger.info."""
    if not logger.isEnabledFor(logging.INFO):
        return
    writer = _sole_json_writer(logger)
    if writer is None:
        logger.info(message, extra=dict(fields))
        return
    handler, formatter = writer
    created = time.time()
    handler.write_line(formatter.line(created, (created - int(created)) * 1000, "INFO", logger.name, message, fields))


def _sole_json_writer(logger: logging.Logger) -> tuple[JsonLinesHandler, JsonFormatter] | None:
    """The JsonLinesHandler, and its JsonFormatter, that alone would write `logger`'s INFO records (logging's own
    walk: the handlers up the chain of parents until one does not propagate); None when any other handler, or any
    filter, is on the way."""
    found: tuple[JsonLinesHandler, JsonFormatter] | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            formatter = handler.formatter
            if (
                found is not None
                or not isinstance(handler, JsonLinesHandler)
                or not isinstance(formatter, JsonFormatter)
                or handler.filters
                or handler.level > logging.INFO
            ):
                return None
            found = handler, formatter
        if not current.propagate:
            break
        current = current.parent
    return found


@contextmanager
def batched_log_lines() -> Iterator[None]:
    """The log lines of the block are written together when it ends, with one write to stderr: for bookkeeping
    that logs many records at once. Without configure_logging's handler, records are written as they come."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, JsonLinesHandler)]
    if not handlers:
        yield
        return
    with handlers[0].batch():
        yield


def new_error_id() -> str:
    """A fresh id that ties what a user is shown to the log line about it."""
    return uuid.uuid4().hex[:12]


def log_failure(logger: logging.Logger, message: str, exc: BaseException) -> str:
    """Log `exc` with its traceback under a fresh error id and return the id, which the client is shown."""
    error_id = new_error_id()
    logger.error(message, exc_info=exc, extra={"error_id": error_id})
    return error_id


_TRACEBACK_CONTINUES = (
    "Traceback (most recent call last):",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    "",
)


class StderrToLog(io.TextIOBase):
    """Stands in for sys.stderr: text that libraries print there becomes JSON log records.

    Gradio prints the tracebacks of failed events with `traceback.print_exc()` (gradio 6.31
    `queueing.py`, `routes.py`, `utils.py`), not through logging; a traceback becomes one record
    (logger "stderr", level error, the text in `traceback`), any other line a warning record.
    """

    def __init__(self, logger: logging.Logger):
        super().__init__()
        self._logger = logger
        self._partial = ""
        self._traceback: list[str] = []
        self._lock = threading.RLock()  # re-entrant: a failing handler reports to sys.stderr, which is this

    def writable(self) -> bool:
        """A text stream that accepts writes."""
        return True

    def write(self, text: str) -> int:
        """Buffer `text`; log each complete line (a traceback once its last line is in)."""
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                self._take(line)
        return len(text)

    def flush(self) -> None:
        """Log what is buffered, complete or not."""
        with self._lock:
            if self._partial:
                self._take(self._partial)
                self._partial = ""
            self._end_traceback()

    def _take(self, line: str) -> None:
        if self._traceback or line.startswith("Traceback"):
            self._traceback.append(line)
            # The exception's own line ends a traceback: unindented, and not one of the joining lines.
            if not line.startswith((" ", "\t")) and line not in _TRACEBACK_CONTINUES and len(self._traceback) > 1:
                self._end_traceback()
        elif line.strip():
            self._logger.warning(line)

    def _end_traceback(self) -> None:
        if self._traceback:
            text = "\n".join(self._traceback).strip()
            self._traceback = []
            self._logger.error(text.rsplit("\n", 1)[-1], extra={"traceback": text})


def configure_logging(level: str = "INFO") -> None:
    """Send our logs, uvicorn's, Gradio's and whatever is printed to stderr to stderr as JSON lines
    (stdout is left to EMF metrics)."""
    handler = JsonLinesHandler(sys.__stderr__)
    handler.setFormatter(JsonFormatter())
    # The JSON lines carry none of these, so no record looks them up: its caller's file, line and function (a
    # walk up the stack), thread, process and task. The logging HOWTO's "Optimization" section names each switch.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.logAsyncioTasks = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # Our RequestLogMiddleware writes the per-request line; uvicorn's access log would duplicate it.
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("httpx", "httpcore", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn() output as records too
    sys.stderr = StderrToLog(logging.getLogger("stderr"))


def quiet_model_libraries() -> None:
    """Silence diffusers/transformers progress bars and info chatter: they would break the JSON log stream."""
    import diffusers
    import transformers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
