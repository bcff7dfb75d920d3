"""A rehearsal of `llmRouter`: the real vllm-router binary (the pinned wheel, in .cache/vllm-router-venv) started with
the flags the synth gives it (cdk/llm/router.py router_args) in front of two real gateways, each in front of a
stand-in engine, all on free loopback ports. Kubernetes discovery is the one flag set replaced, by the router's
static worker list: the gateways' addresses, at their port, as discovery would add them. With cache_aware the
gateways forward the render routes (RENDER_ROUTES, as the synth sets it on NVIDIA pods)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from cdk import versions
from cdk.accelerators import ACCELERATORS
from cdk.config.serving import ServingConfig
from cdk.llm import router
from common.probe_paths import READINESS_PATH
from common.server_process import free_port, serve_process
from tests.cdk.conftest import DEFAULT_CONTEXT, REPO_ROOT
from tests.llm.stack import run_gateway, run_standin

ROUTER_BIN = REPO_ROOT / ".cache" / "vllm-router-venv" / "bin" / "vllm-router"
DISCOVERY_FLAGS = ("--service-discovery", "--selector", "--service-discovery-port", "--service-discovery-namespace")
REQUESTS = 32
TURNS = 6
CONVERSATIONS = 4


def test_make_test_builds_the_pinned_router() -> None:
    requirements = (REPO_ROOT / "tests" / "support" / "vllm-router-requirements.txt").read_text().splitlines()
    assert f"vllm-router=={versions.VLLM_ROUTER_VERSION}" in requirements
    assert "$(ROUTER_VENV)/.installed" in (REPO_ROOT / "Makefile").read_text().split("\ntest:", 1)[1].splitlines()[0]


def rehearsal_args(policy: str, port: int, workers: list[str]) -> list[str]:
    """The synthesized flags, on the loopback at `port`, with discovery replaced by `workers`."""
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    args = router.router_args(ACCELERATORS["nvidia"], policy, cfg)
    start = args.index("--service-discovery")
    end = next(i for i, a in enumerate(args) if a.startswith("--service-discovery-namespace=")) + 1
    assert all(a.startswith(DISCOVERY_FLAGS) or "=" in a for a in args[start:end])
    kept = [a for a in args[:start] + args[end:] if not a.startswith(("--host=", "--port="))]
    return ["--host=127.0.0.1", f"--port={port}", *kept, "--worker-urls", *workers]


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=f"no {ROUTER_BIN}: docs/llm-serving.md 'In-pool routing'")
def test_the_router_with_the_synthesized_flags_spreads_requests_over_two_gateways(tmp_path: Path):
    with (
        run_standin(record=True) as (engine_a, standin_a),
        run_standin(record=True) as (engine_b, standin_b),
        run_gateway(engine_a, tmp_path) as gateway_a,
        run_gateway(engine_b, tmp_path) as gateway_b,
    ):
        port = free_port()
        argv = [str(ROUTER_BIN), *rehearsal_args("power_of_two", port, [gateway_a.url, gateway_b.url])]
        # The router is ready (its /readiness 200) once a worker passed its health check on the gateway's /readiness.
        with serve_process(argv, log=tmp_path / "router.log", port=port, ready_path=router.ROUTER_READINESS_PATH):
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=60) as client:
                assert client.get(router.LIVENESS_PATH).status_code == 200
                body = {"model": "standin", "prompt": "one two three", "max_tokens": 4}
                answers = [client.post("/v1/completions", json=body) for _ in range(REQUESTS)]
                assert [a.status_code for a in answers] == [200] * REQUESTS, answers[0].text
                workers = client.get("/list_workers").json()["urls"]
        served = (len(gateway_a.wait_record(1)), len(gateway_b.wait_record(1)))
        # Each went through a gateway (its usage record), and the policy used both.
        assert sum(served) >= REQUESTS and min(served) >= 1, served
        assert sorted(workers) == sorted([gateway_a.url, gateway_b.url])
        assert len(standin_a.prompts) + len(standin_b.prompts) >= REQUESTS


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=f"no {ROUTER_BIN}: docs/llm-serving.md 'In-pool routing'")
def test_every_synthesized_flag_is_one_the_pinned_router_takes():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    synthesized = router.router_args(ACCELERATORS["nvidia"], "power_of_two", cfg)
    assert f"--health-check-endpoint={READINESS_PATH}" in synthesized
    help_text = subprocess.run([str(ROUTER_BIN), "--help"], capture_output=True, text=True, check=True).stdout
    for flag in {a.split("=", 1)[0] for a in synthesized if a.startswith("--")}:
        assert flag in help_text, flag


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=f"no {ROUTER_BIN}: docs/llm-serving.md 'In-pool routing'")
def test_cache_aware_renders_through_the_gateways_and_keeps_each_conversation_on_one_engine(tmp_path: Path):
    """Each request is rendered on every gateway (the router's prefix tree is of token ids); every later turn of a
    conversation extends the prompt of its last, so it goes where its prefix went."""
    render_on = {"RENDER_ROUTES": "true"}
    with (
        run_standin(record=True) as (engine_a, standin_a),
        run_standin(record=True) as (engine_b, standin_b),
        run_gateway(engine_a, tmp_path, render_on) as gateway_a,
        run_gateway(engine_b, tmp_path, render_on) as gateway_b,
    ):
        port = free_port()
        argv = [str(ROUTER_BIN), *rehearsal_args("cache_aware", port, [gateway_a.url, gateway_b.url])]
        with (
            serve_process(argv, log=tmp_path / "router.log", port=port, ready_path=router.ROUTER_READINESS_PATH),
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client,
        ):
            for conversation in range(CONVERSATIONS):
                text = f"conversation{conversation} " + "the sea light house keeper " * 40
                for turn in range(TURNS):
                    text += f" turn{turn} " + "night storm ship harbour " * 10
                    body = {"model": "standin", "prompt": text, "max_tokens": 4}
                    answer = client.post("/v1/completions", json=body)
                    assert answer.status_code == 200, answer.text
                    text += answer.json()["choices"][0]["text"]
    requests = CONVERSATIONS * TURNS
    assert standin_a.renders + standin_b.renders >= requests  # the router asked the gateways' render routes
    for conversation in range(CONVERSATIONS):
        served = [
            sum(p.startswith(f"conversation{conversation} ") for p in standin.prompts)
            for standin in (standin_a, standin_b)
        ]
        assert sorted(served) == [0, TURNS], (conversation, served)
