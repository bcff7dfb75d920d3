"""Structured logs: one JSON object per line, with any `extra={...}` fields as top-level keys."""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_STANDARD.add("color_message")  # uvicorn's ANSI-coloured copy of the message


class JsonFormatter(logging.Formatter):
    """Format a record as a JSON line: time, level, logger, message, extras, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        """The JSON line for `record`."""
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD and v is not None})
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def new_error_id() -> str:
    """A fresh id that ties what a user is shown to the log line about it."""
    return uuid.uuid4().hex[:12]


def log_failure(logger: logging.Logger, message: str, exc: BaseException) -> str:
    """Log `exc` with its traceback under a fresh error id and return the id, which the client is shown."""
    error_id = new_error_id()
    logger.error(message, exc_info=exc, extra={"error_id": error_id})
    return error_id


def configure_logging(level: str = "INFO") -> None:
    """Send our logs and uvicorn's to stderr as JSON lines (stdout is left to EMF metrics)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
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


def quiet_model_libraries() -> None:
    """Silence diffusers/transformers progress bars and info chatter: they would break the JSON log stream."""
    import diffusers
    import transformers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
