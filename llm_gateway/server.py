"""Serving the gateway: its parts built from the settings, on the shared draining server.

The server is every service's (common/http/): uvicorn with bounded heads, bodies and connections, and
the drain on SIGTERM within one grace period. The first SIGTERM flips readiness to 503 and refuses new
generations (503, Retry-After) while open ones, streams included, run on; when they are done, or
SHUTDOWN_GRACE_S less a short reserve has passed, the ones still open are cut (their stream ends with an
error event and vLLM aborts them) and uvicorn gets the reserve to send those last bytes and close.
"""

from __future__ import annotations

from common.auth.tokens import TokenVerifier
from common.http.protocol import server_config
from common.http.server import DrainingServer
from common.metrics.flusher import make_publisher
from llm_gateway.engine_client import EngineClient
from llm_gateway.errors import error_body
from llm_gateway.gateway import Gateway
from llm_gateway.settings import GatewaySettings


def build_gateway(settings: GatewaySettings) -> Gateway:
    """The gateway for `settings`: its upstream client, the token verifier when AUTH=cognito, and the
    metrics publisher METRICS names."""
    verifier = TokenVerifier(settings.auth_issuer, settings.auth_client_id_list) if settings.auth == "cognito" else None
    return Gateway(settings, http=EngineClient(settings), verifier=verifier, publisher=make_publisher(settings.metrics))


def build_server(gateway: Gateway, settings: GatewaySettings) -> DrainingServer:
    """The server for `gateway` on HOST:PORT (no access log: the gateway logs each request itself)."""
    # No X-Forwarded-For rewriting (uvicorn's ProxyHeadersMiddleware, a Python layer on every request): the gateway
    # reads neither the client's address nor the scheme.
    config = server_config(
        gateway,
        settings,
        error_body=error_body,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        proxy_headers=False,
    )
    return DrainingServer(config, gateway.admission, settings.shutdown_grace_s)
