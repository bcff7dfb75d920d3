"""How the gateway names its engine: `http://host:port`, or `unix:/path` for the Unix socket the engine listens on
(vLLM's `--uds`, which vLLM logs as `unix:<path>`). Standard library only: the CDK app imports it to write the pods'
UPSTREAM_URL without the gateway's run-time requirements."""

from __future__ import annotations

from typing import Final

UNIX_SCHEME: Final = "unix:"
MAX_SOCKET_PATH_BYTES: Final = 107
"""The longest Unix socket path Linux takes (`sun_path` is 108 bytes, its terminating NUL included)."""


def socket_path(base_url: str) -> str | None:
    """The socket's path of a `unix:` URL; None for any other URL."""
    return base_url[len(UNIX_SCHEME) :] if base_url.startswith(UNIX_SCHEME) else None


def socket_path_problem(base_url: str) -> str | None:
    """Why `base_url` cannot be used as a `unix:` socket address, or None when it can (or is not one)."""
    path = socket_path(base_url)
    if path is None:
        return None
    if not path.startswith("/"):
        return f"a Unix socket is named by an absolute path (unix:/run/engine/vllm.sock), not {base_url!r}"
    if len(path.encode()) > MAX_SOCKET_PATH_BYTES:
        return f"a Unix socket path is at most {MAX_SOCKET_PATH_BYTES} bytes; {path[:48]!r}... is longer"
    return None
