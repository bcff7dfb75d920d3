"""`make run` (python -m app) on a port something else holds: one line that says what to do, at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from common.server_process import REPO_ROOT


def test_a_busy_port_is_one_line_naming_a_free_port_before_anything_is_served(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "MODEL_CACHE_DIR": str(tmp_path)}
        run = subprocess.run(
            [sys.executable, "-m", "app"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"error: port {port} is in use on 127.0.0.1")
    suggested = int(line.rsplit("PORT=", 1)[1].split()[0])
    assert suggested != port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", suggested))  # the port it suggests is free
