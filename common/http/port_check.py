"""Before serving: is the port free? If not, say so in one line, with a free port to use instead."""

from __future__ import annotations

import errno
import socket


def _bind(host: str, port: int) -> OSError | None:
    """Try the bind uvicorn will do (SO_REUSEADDR, as uvicorn sets it); the error, or None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc
    return None


def port_problem(host: str, port: int, *, variable: str = "PORT", command: str = "make run") -> str | None:
    """None when `host:port` can be bound; else a message that says what to do (set `variable` for `command`)."""
    error = _bind(host, port)
    if error is None:
        return None
    if error.errno != errno.EADDRINUSE:
        return f"cannot listen on {host}:{port} ({error.strerror}): set HOST and {variable}"
    free = next((p for p in range(port + 1, min(port + 100, 65536)) if _bind(host, p) is None), None)
    hint = f"{variable}={free if free is not None else '<another port>'} {command}"
    return f"port {port} is in use on {host} (another server is running there?): stop it, or use another: {hint}"
