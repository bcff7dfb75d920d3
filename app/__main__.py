"""`python -m app`: read the settings, then serve the API and UI with uvicorn."""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def main() -> int:
    """Serve the service until stopped (common/http/entrypoint.py: exit 2 with one line for a bad setting)."""
    from app.server import create_app
    from app.settings import Settings, load_settings
    from common.http.entrypoint import run_service
    from common.http.protocol import server_config
    from common.http.server import DrainingServer

    def build(settings: Settings) -> DrainingServer:
        app = create_app(settings)  # the jobs directory is checked here
        config = server_config(app, settings, host=settings.host, port=settings.port)
        return DrainingServer(config, app.state.service, settings.shutdown_grace_s)

    return run_service("app", load_settings, build)


if __name__ == "__main__":
    status = main()
    # The service has stopped and flushed its work; the interpreter's own teardown of torch and the
    # model would only add seconds of silence (4 s measured on a 2-core box) before the prompt returns.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
