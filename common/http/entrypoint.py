"""The one shape of every service's `python -m`: the settings read and checked, the open-file limit and the port
checked, the logs configured, the server built, then served until stopped.

Exit statuses a supervisor (Kubernetes, `make run`) can read: 0 after a clean stop, SIGTERM included; 2 for an
invalid setting or a busy port, with one plain line on the process's own stderr (not the JSON logs); 130 after
Ctrl-C.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any, TypeVar

from common.http.port_check import port_problem
from common.http.protocol import ensure_descriptors
from common.http.server import DrainingServer
from common.logs import configure_logging
from common.settings import ServiceSettings, SettingsError

S = TypeVar("S", bound=ServiceSettings)


class Stopped(Exception):
    """The SIGTERM that uvicorn re-raises once it has drained and stopped: a clean stop, exit status 0."""


def _stopped(sig: int, frame: FrameType | None) -> None:
    raise Stopped


def _refused(problem: object) -> int:
    print(f"error: {problem}", file=sys.__stderr__)
    return 2


def run_service(
    logger: str,
    load: Callable[[], S],
    build: Callable[[S], DrainingServer],
    *,
    upstream_connections: Callable[[S], int] = lambda _settings: 0,
    log_fields: Callable[[S], Mapping[str, Any]] = lambda _settings: {},
) -> int:
    """Serve what `build` makes of the settings `load` reads, until stopped; the exit status (module docstring).

    `load` and `build` may raise SettingsError (a setting the service checks as it starts, such as the jobs
    directory); `upstream_connections` is how many connections the service opens to what it forwards to, which
    the open-file limit must hold besides MAX_CONNECTIONS; `log_fields` are said in the "serving" line.
    """
    try:
        settings = load()
        ensure_descriptors(settings, upstream_connections(settings))
    except SettingsError as exc:
        return _refused(exc)
    problem = port_problem(settings.host, settings.port)
    if problem is not None:
        return _refused(problem)
    configure_logging(settings.log_level)
    try:
        server = build(settings)
    except SettingsError as exc:
        return _refused(exc)
    url = f"http://{settings.host}:{settings.port}/"
    logging.getLogger(logger).info("serving", extra={"url": url, **log_fields(settings)})
    # uvicorn handles SIGTERM while it serves, then restores this handler and re-raises the signal; with the
    # default handler the process would die of it, and `make run` would end with "Terminated".
    signal.signal(signal.SIGTERM, _stopped)
    try:
        server.run()
    except Stopped:
        return 0
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has stopped: the exit status says so, no traceback.
        return 130
    return 0
