"""`python -m starting_gate`: serve the gate on ${HOST:-0.0.0.0}:${PORT:-8000} on the shared bounded server,
publishing demand every minute; exit 2 with one readable line when a setting is invalid."""

from __future__ import annotations

import sys

FLUSH_PERIOD_S = 60.0  # the KEDA trigger reads the metric per minute (cdk/serving/scaling.py METRIC_PERIOD_S)


def main() -> int:
    """Run the gate until SIGTERM: drain within SHUTDOWN_GRACE_S, then publish the last demand counted."""
    import boto3

    from common.http.entrypoint import run_service
    from common.http.protocol import server_config
    from common.http.server import DrainingServer
    from starting_gate.demand import DemandCounter, Flusher
    from starting_gate.server import create_app
    from starting_gate.settings import GateSettings, load_settings

    def build(settings: GateSettings) -> DrainingServer:
        counter = DemandCounter()
        flusher = Flusher(counter, boto3.client("cloudwatch"), settings.demand_units, FLUSH_PERIOD_S)
        flusher.start()
        # The last flush runs in the app's shutdown, once the drain is over: on SIGTERM uvicorn re-raises the
        # signal after it stops serving, so nothing after server.run would run (tests/rehearsal/test_starting_gate.py).
        gate = create_app(settings, counter, on_shutdown=flusher.stop)
        config = server_config(gate, settings, host=settings.host, port=settings.port)
        return DrainingServer(config, gate, settings.shutdown_grace_s)

    return run_service(
        "starting_gate",
        load_settings,
        build,
        upstream_connections=lambda settings: settings.max_connections,
        log_fields=lambda settings: {"upstream": settings.upstream_url},
    )


if __name__ == "__main__":
    sys.exit(main())
