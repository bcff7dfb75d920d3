"""`python -m llm_gateway`: read the settings, then serve the gateway in front of UPSTREAM_URL."""

from __future__ import annotations

import sys


def main() -> int:
    """Serve the gateway until stopped (common/http/entrypoint.py: exit 2 with one line for a bad setting)."""
    from common.http.entrypoint import run_service
    from llm_gateway.server import build_gateway, build_server
    from llm_gateway.settings import load_settings

    return run_service(
        "llm_gateway",
        load_settings,
        lambda settings: build_server(build_gateway(settings), settings),
        upstream_connections=lambda settings: settings.engine_connections,
        log_fields=lambda settings: {"upstream": settings.upstream_url, "auth": settings.auth},
    )


if __name__ == "__main__":
    sys.exit(main())
