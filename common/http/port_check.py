"""Before serving: is the port (or Unix socket path) free? If not, say so in one line, with what to do instead."""

from __future__ import annotations

import errno
import os
import socket
import stat


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


def socket_problem(path: str, *, variable: str = "ENGINE_SOCKET", command: str = "make run-llm") -> str | None:
    """None when a server can bind the Unix socket `path`; a socket file there that nothing listens on (left by a
    server that is gone: a socket's file outlives it) is removed first. Else a message that says what to do."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        return f"the folder of {variable}={path} does not exist: create it, or set {variable} to another path"
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return f"{path} exists and is not a socket: set {variable} to another path"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)  # a listener whose backlog is full keeps a blocking connect waiting
            try:
                probe.connect(path)
            except ConnectionRefusedError:
                os.unlink(path)  # nothing listens: a leftover
                return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot use the socket {path} ({exc.strerror or exc}): set {variable} to another path"
    return f"a server already listens on {path} (another {command} running?): stop it, or set {variable}"
