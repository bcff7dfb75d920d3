"""A rehearsal of `llmRouter`: the real vllm-router binary (the pinned wheel, in .cache/vllm-router-venv) started with
the flags the synth gives it (cdk/llm/router.py router_args) in front of two real gateways, each in front of a
stand-in engine, all on free loopback ports. Kubernetes discovery is the one flag set replaced, by the router's
static worker list: the gateways' addresses, at their port, as discovery would add them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

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
