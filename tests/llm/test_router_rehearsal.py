"""A rehearsal of `llmRouter`: the real vllm-router binary (the pinned wheel, in .cache/vllm-router-venv) started with
the flags the synth gives it (cdk/llm/router.py router_args) in front of two workers, each a real gateway with the
render routes on (RENDER_ROUTES, as the synth sets it on NVIDIA pods for cache_aware) in front of its own engine,
all on free loopback ports. The engines are two of vLLM's CPU engines with `make run-llm`'s tiny model, started with
RENDER_ROUTES on as `python -m llm_local` starts them (each on its own Unix socket, as on a pod), and, for a
rehearsal that needs no vLLM, two pace stand-ins. Kubernetes discovery is the one flag set replaced, by the router's
static worker list: the gateways' addresses, at their port, as discovery would add them."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cdk import versions
from cdk.accelerators import ACCELERATORS
from cdk.config.serving import ServingConfig
from cdk.llm import router
from common.probe_paths import READINESS_PATH
from common.server_process import ServerProcess, free_port, serve_process
from llm_bench.standin_engine import STANDIN_MODEL
from llm_local.engine import SERVED_MODEL_NAME, EngineOptions, EngineProcess, build_tiny_model
from tests.cdk.conftest import DEFAULT_CONTEXT, REPO_ROOT
from tests.llm.stack import ENGINE_READY_TIMEOUT_S, GatewayProcess, engine_metric, run_gateway, run_standin

ROUTER_BIN = REPO_ROOT / ".cache" / "vllm-router-venv" / "bin" / "vllm-router"
NO_ROUTER = f"no {ROUTER_BIN}: docs/llm-serving.md 'In-pool routing'"
DISCOVERY_FLAGS = ("--service-discovery", "--selector", "--service-discovery-port", "--service-discovery-namespace")
RENDER_ON = {"RENDER_ROUTES": "true"}
# vLLM's access log line for an answered render (uvicorn's, in the engine's output).
RENDERED = re.compile(r'"POST /v1/completions/render HTTP/1\.1" 200')
REQUESTS = 24
TURNS = 5
CONVERSATIONS = 4


@dataclass(frozen=True)
class Workers:
    """The router's two workers: a gateway in front of each engine, and what the engines can tell."""

    gateways: tuple[GatewayProcess, GatewayProcess]
    model: str
    renders: Callable[[], int]  # render requests the engines answered so far
    prefix_cache_hits: Callable[[], float] | None  # the engines' prefix-cache hits so far, in tokens (vLLM only)

    def served(self) -> tuple[int, int]:
        """Generations each gateway has seen end (its per-request records)."""
        first, second = self.gateways
        return len(first.records()), len(second.records())


@pytest.fixture(scope="module")
def standin_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """Two gateways, each in front of a pace stand-in that answers the render routes in vLLM's shape."""
    log_dir = tmp_path_factory.mktemp("router-standins")
    with (
        run_standin() as (engine_a, standin_a),
        run_standin() as (engine_b, standin_b),
        run_gateway(engine_a, log_dir, RENDER_ON) as gateway_a,
        run_gateway(engine_b, log_dir, RENDER_ON) as gateway_b,
    ):
        yield Workers((gateway_a, gateway_b), STANDIN_MODEL, lambda: standin_a.renders + standin_b.renders, None)


@pytest.fixture(scope="module")
def cpu_workers(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """Two gateways, each in front of a CPU engine of its own started as `python -m llm_local` starts it with
    RENDER_ROUTES=true, each on its own Unix socket (as on two pods); stopped at the end of the module."""
    log_dir = tmp_path_factory.mktemp("router-engines")
    model = build_tiny_model(vllm_env)
    with ExitStack() as stack:
        # Not under log_dir: pytest's folders can make a path longer than a Unix socket's 107 bytes.
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-engines-"))
        logs = [log_dir / f"engine-{name}.log" for name in ("a", "b")]
        engines = []
        for name, log in zip(("a", "b"), logs, strict=True):
            options = EngineOptions(socket=f"{folder}/{name}.sock", render_routes=True)
            engine = EngineProcess(options, model, log=stack.enter_context(log.open("w", encoding="utf-8")))
            stack.callback(engine.stop)
            engines.append(engine)
        for engine in engines:  # both start at once
            engine.wait_ready(ENGINE_READY_TIMEOUT_S)
        gateways = [stack.enter_context(run_gateway(engine.url, log_dir, RENDER_ON)) for engine in engines]
        yield Workers(
            (gateways[0], gateways[1]),
            SERVED_MODEL_NAME,
            lambda: sum(len(RENDERED.findall(log.read_text(encoding="utf-8"))) for log in logs),
            lambda: sum(engine_metric(engine.url, "vllm:prefix_cache_hits_total") for engine in engines),
        )


@pytest.fixture(params=["cpu_workers", "standin_workers"])
def workers(request: pytest.FixtureRequest) -> Workers:
    """Each pair of workers in turn (tests/support/tiers.py reads the fixture's name: the CPU pair is the engine
    tier)."""
    return request.getfixturevalue(request.param)


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


def run_router(policy: str, workers: Workers, log_dir: Path) -> AbstractContextManager[ServerProcess]:
    """The router binary with the synthesized flags for `policy`, in front of `workers`; ready (its /readiness 200)
    once a worker passed its health check on the gateway's /readiness."""
    port = free_port()
    argv = [str(ROUTER_BIN), *rehearsal_args(policy, port, [gateway.url for gateway in workers.gateways])]
    return serve_process(argv, log=log_dir / f"router-{policy}.log", port=port, ready_path=router.ROUTER_READINESS_PATH)


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=NO_ROUTER)
def test_power_of_two_spreads_requests_over_both_workers(workers: Workers, tmp_path: Path):
    before = workers.served()
    with (
        run_router("power_of_two", workers, tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=120) as client,
    ):
        assert client.get(router.LIVENESS_PATH).status_code == 200
        body = {"model": workers.model, "prompt": "one two three", "max_tokens": 4}
        answers = [client.post("/v1/completions", json=body) for _ in range(REQUESTS)]
        assert [a.status_code for a in answers] == [200] * REQUESTS, answers[0].text
        assert sorted(client.get("/list_workers").json()["urls"]) == sorted(g.url for g in workers.gateways)
    # Each went through a gateway (its usage record), and the policy used both.
    served = [after - earlier for after, earlier in zip(workers.served(), before, strict=True)]
    assert sum(served) == REQUESTS and min(served) >= 1, served


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=NO_ROUTER)
def test_cache_aware_renders_through_the_gateways_and_keeps_each_conversation_on_one_engine(
    workers: Workers, tmp_path: Path
):
    """Requests are rendered through the gateways (the router's prefix tree is of token ids); every later turn of a
    conversation extends the prompt of its last, so it goes where its prefix went, and a real engine finds that
    prefix in its cache."""
    renders, hits = workers.renders(), workers.prefix_cache_hits() if workers.prefix_cache_hits else None
    per_conversation = []
    with (
        run_router("cache_aware", workers, tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=120) as client,
    ):
        for conversation in range(CONVERSATIONS):
            before = workers.served()
            text = f"conversation{conversation} " + "the sea light house keeper " * 40
            for turn in range(TURNS):
                text += f" turn{turn} " + "night storm ship harbour " * 10
                answer = client.post("/v1/completions", json={"model": workers.model, "prompt": text, "max_tokens": 4})
                assert answer.status_code == 200, answer.text
                text += answer.json()["choices"][0]["text"]
            per_conversation.append([after - earlier for after, earlier in zip(workers.served(), before, strict=True)])
    assert all(sorted(served) == [0, TURNS] for served in per_conversation), per_conversation
    assert workers.renders() - renders >= CONVERSATIONS * TURNS  # the router asked the gateways' render routes
    if workers.prefix_cache_hits is not None:
        assert workers.prefix_cache_hits() > hits  # later turns were served from the cached prefix


@pytest.mark.skipif(not ROUTER_BIN.exists(), reason=f"no {ROUTER_BIN}: docs/llm-serving.md 'In-pool routing'")
def test_every_synthesized_flag_is_one_the_pinned_router_takes():
    cfg = ServingConfig.from_context(DEFAULT_CONTEXT)
    synthesized = router.router_args(ACCELERATORS["nvidia"], "power_of_two", cfg)
    assert f"--health-check-endpoint={READINESS_PATH}" in synthesized
    help_text = subprocess.run([str(ROUTER_BIN), "--help"], capture_output=True, text=True, check=True).stdout
    for flag in {a.split("=", 1)[0] for a in synthesized if a.startswith("--")}:
        assert flag in help_text, flag
