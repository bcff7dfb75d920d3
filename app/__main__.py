"""`python -m app`: read the settings, then serve the API and UI with uvicorn."""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


class Stopped(Exception):
    """The SIGTERM that uvicorn re-raises once it has drained and stopped: a clean stop, exit status 0."""


def _stopped(sig: int, frame: FrameType | None) -> None:
    raise Stopped


def main() -> int:
    """Start the service; exit 2 with one readable line when a setting is invalid."""
    from app.server import create_app
    from app.settings import load_settings
    from common.http.port_check import port_problem
    from common.http.protocol import ensure_descriptors, server_config
    from common.http.server import DrainingServer
    from common.logs import configure_logging
    from common.settings import SettingsError

    try:
        settings = load_settings()
        ensure_descriptors(settings)
        problem = port_problem(settings.host, settings.port)
        if problem is not None:
            print(f"error: {problem}", file=sys.__stderr__)
            return 2
        configure_logging(settings.log_level)
        app = create_app(settings)  # the jobs directory is checked here
    except SettingsError as exc:
        # The process's own stderr: one plain line, even once the logs are JSON.
        print(f"error: {exc}", file=sys.__stderr__)
        return 2
    config = server_config(app, settings, host=settings.host, port=settings.port)
    server = DrainingServer(config, app.state.service, settings.shutdown_grace_s)
    logging.getLogger("app").info("serving", extra={"url": f"http://{settings.host}:{settings.port}/"})
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


if __name__ == "__main__":
    status = main()
    # The service has stopped and flushed its work; the interpreter's own teardown of torch and the
    # model would only add seconds of silence (4 s measured on a 2-core box) before the prompt returns.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
