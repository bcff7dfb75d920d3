"""`python -m starting_gate`: serve the gate on 0.0.0.0:${PORT:-8000}, publishing demand every minute."""

from __future__ import annotations

import os

import boto3
import uvicorn

from starting_gate.demand import DemandCounter, Flusher
from starting_gate.server import create_app
from starting_gate.settings import GateSettings

FLUSH_PERIOD_S = 60.0  # the KEDA trigger reads the metric per minute (cdk/serving/scaling.py METRIC_PERIOD_S)


def main() -> None:
    """Run the gate until SIGTERM."""
    settings = GateSettings.from_env()
    counter = DemandCounter()
    flusher = Flusher(counter, boto3.client("cloudwatch"), settings.demand_units, FLUSH_PERIOD_S)
    flusher.start()
    # The last flush runs in the app's shutdown: on SIGTERM uvicorn re-raises the signal after it stops serving,
    # so nothing after uvicorn.run would run (tests/rehearsal/test_starting_gate.py stops the pod that way).
    app = create_app(settings, counter, on_shutdown=flusher.stop)
    uvicorn.run(app, host="0.0.0.0", port=int(os.environ.get("PORT", "8000")))


if __name__ == "__main__":
    main()
