"""`python -m starting_gate`: serve the gate on ${HOST:-0.0.0.0}:${PORT:-8000} on the shared bounded server,
publishing demand every minute; exit 2 with one readable line when a setting is invalid."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

FLUSH_PERIOD_S = 60.0  # the KEDA trigger reads the metric per minute (cdk/serving/scaling.py METRIC_PERIOD_S)


class Stopped(Exception):
    """The SIGTERM that uvicorn re-raises once it has drained and stopped: a clean stop, exit status 0."""


def _stopped(sig: int, frame: FrameType | None) -> None:
    raise Stopped


def main() -> int:
    """Run the gate until SIGTERM: drain within SHUTDOWN_GRACE_S, then publish the last demand counted."""
    import boto3

    from common.http.port_check import port_problem
    from common.http.protocol import ensure_descriptors, server_config
    from common.http.server import DrainingServer
    from common.logs import configure_logging
    from common.settings import SettingsError
    from starting_gate.demand import DemandCounter, Flusher
    from starting_gate.server import create_app
    from starting_gate.settings import load_settings

    try:
        settings = load_settings()
        ensure_descriptors(settings, settings.max_connections)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.__stderr__)
        return 2
    problem = port_problem(settings.host, settings.port)
    if problem is not None:
        print(f"error: {problem}", file=sys.__stderr__)
        return 2
    configure_logging(settings.log_level)
    counter = DemandCounter()
    flusher = Flusher(counter, boto3.client("cloudwatch"), settings.demand_units, FLUSH_PERIOD_S)
    flusher.start()
    # The last flush runs in the app's shutdown, once the drain is over: on SIGTERM uvicorn re-raises the signal
    # after it stops serving, so nothing after server.run would run (tests/rehearsal/test_starting_gate.py).
    gate = create_app(settings, counter, on_shutdown=flusher.stop)
    server = DrainingServer(
        server_config(gate, settings, host=settings.host, port=settings.port), gate, settings.shutdown_grace_s
    )
    logging.getLogger("starting_gate").info(
        "serving", extra={"url": f"http://{settings.host}:{settings.port}/", "upstream": settings.upstream_url}
    )
    signal.signal(signal.SIGTERM, _stopped)
    try:
        server.run()
    except Stopped:
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
