"""`python -m llm_gateway`: read the settings, then serve the gateway in front of UPSTREAM_URL."""

from __future__ import annotations

import logging
import sys


def main() -> int:
    """Start the gateway; exit 2 with one readable line when a setting is invalid."""
    from common.http.port_check import port_problem
    from common.http.protocol import ensure_descriptors
    from common.logs import configure_logging
    from common.settings import SettingsError
    from llm_gateway.server import build_gateway, build_server
    from llm_gateway.settings import load_settings

    try:
        settings = load_settings()
        ensure_descriptors(settings, settings.engine_connections)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = port_problem(settings.host, settings.port)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    gateway = build_gateway(settings)
    logging.getLogger("llm_gateway").info(
        "serving",
        extra={
            "url": f"http://{settings.host}:{settings.port}/",
            "upstream": settings.upstream_url,
            "auth": settings.auth,
        },
    )
    try:
        build_server(gateway, settings).run()
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has stopped: the exit status says so, no traceback.
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
