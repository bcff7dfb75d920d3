"""`python -m llm_gateway`: read the settings, then serve the gateway in front of UPSTREAM_URL."""

from __future__ import annotations

import logging
import sys


def main() -> int:
    """Start the gateway; exit 2 with one readable line when a setting is invalid."""
    from llm_gateway.server import build_gateway, build_server, configure_logging
    from llm_gateway.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
    build_server(gateway, settings).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
