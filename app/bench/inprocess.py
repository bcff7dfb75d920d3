"""Run an ASGI app under a real uvicorn server on a free loopback port, in a background thread."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from app.settings import Settings, load_settings
from common.http.protocol import server_config


@contextmanager
def serve_in_thread(app: Any, settings: Settings | None = None, start_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve an ASGI app as `python -m app` does; yield its URL once it accepts connections.

    The server's limits come from `settings`: by default those of the app's service (an app from
    `create_app`), or the defaults for any other app (a test's stand-in identity provider, say).
    """
    if settings is None:
        service = getattr(getattr(app, "state", None), "service", None)
        settings = service.settings if service is not None else load_settings()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free one, and we hold it from now on
    server = uvicorn.Server(server_config(app, settings, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn")
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def bench_cache_dir() -> Path:
    """Where benchmarks keep built models between runs: MODEL_CACHE_DIR, else a folder in the temp dir."""
    return Path(os.environ.get("MODEL_CACHE_DIR", Path(tempfile.gettempdir()) / "sd-bench-cache"))


def wait_ready(url: str, service: Any, timeout_s: float = 600.0) -> bool:
    """Poll /readiness until 200; False (and say why) when the model failed to load or never got ready."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{url}/readiness").status_code != 200:
        if service.load_error or time.monotonic() > deadline:
            print(f"the service did not become ready: {service.load_error}")
            return False
        time.sleep(0.2)
    return True
