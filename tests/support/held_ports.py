"""`pytest --hold-ports=8000,8001`: the run holds those loopback ports, as `make run` and `make run-llm` in another
terminal would, so that a test that needs a fixed port to be free fails here rather than on a contributor's machine.
A port something else already holds is left to it: it is taken either way."""

from __future__ import annotations

import contextlib
import errno
import socket

import pytest

_HELD = pytest.StashKey[list[socket.socket]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The option, a comma-separated list of ports."""
    parser.addoption(
        "--hold-ports",
        default="",
        help="listen on these loopback ports (comma-separated) for the whole run, as a server in another terminal",
    )


def _listen(port: int) -> socket.socket | None:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            return None  # already held: by `make run`, or by the controller of this xdist run
        raise
    sock.listen()
    return sock


def pytest_configure(config: pytest.Config) -> None:
    """Listen on each port named, before any test runs."""
    ports = [int(port) for port in str(config.getoption("hold_ports")).split(",") if port.strip()]
    config.stash[_HELD] = [sock for port in ports if (sock := _listen(port)) is not None]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Let the ports go."""
    for sock in config.stash.get(_HELD, []):
        with contextlib.suppress(OSError):
            sock.close()
