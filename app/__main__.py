"""`python -m app`: read the settings, then serve the API and UI with uvicorn."""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def main() -> int:
    """Start the service; exit 2 with one readable line when a setting is invalid."""
    from app.http_protocol import ensure_descriptors, server_config
    from app.logs import configure_logging
    from app.server import create_app
    from app.settings import SettingsError, load_settings
    from app.shutdown import DrainingServer

    try:
        settings = load_settings()
        ensure_descriptors(settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    app = create_app(settings)
    config = server_config(app, settings, host=settings.host, port=settings.port)
    server = DrainingServer(config, app.state.service, settings.shutdown_grace_s)
    logging.getLogger("app").info("serving", extra={"url": f"http://{settings.host}:{settings.port}/"})
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
