"""`python -m routing_controller`: run the loop in the cluster until SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from types import FrameType

from routing_controller import heartbeat
from routing_controller.settings import Settings, SettingsError


def main() -> int:
    """Load settings and in-cluster credentials, then step every period; a failed step is logged and retried."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    log = logging.getLogger("routing_controller")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        log.error(json.dumps({"event": "BadSettings", "error": str(exc)}))
        return 2

    import boto3
    from kubernetes import client, config

    from routing_controller.loop import Controller

    config.load_incluster_config()
    cloudwatch = boto3.client("cloudwatch") if settings.metrics else None
    controller = Controller(settings, client.ApiClient(), cloudwatch)
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    log.info(json.dumps({"event": "Started", "pools": [p.accelerator for p in settings.pools]}))
    while not stop.is_set():
        try:
            controller.step()
        except Exception as exc:  # keep the last weights and try again next period
            log.error(json.dumps({"event": "StepFailed", "error": f"{type(exc).__name__}: {exc}"}))
        heartbeat.beat()
        stop.wait(settings.period_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
