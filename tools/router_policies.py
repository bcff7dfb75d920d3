"""`python -m tools.router_policies`: vLLM's router policies against round robin on a multi-turn workload.

    python -m tools.router_policies                                    # print the table
    python -m tools.router_policies --results-file docs/benchmarks.md  # and write its section

`make run-llm`'s machinery, scaled to a shared 2-core machine: --engines pace stand-ins (llm_bench/standin_engine.py,
in this process), each behind its own gateway (`python -m llm_gateway` with its pod's settings, RENDER_ROUTES on,
as the synth sets it for cache_aware), and the pinned router binary (.cache/vllm-router-venv, never a dependency of
the project) in front of the gateways, once per policy. --sessions clients each hold a conversation at a time: a
system prompt of its own, then --turns turns, each turn's prompt the last one's plus its answer plus new words (a
chat's history sent again, as the OpenAI API does). Each round runs every policy once, the order rotating.

A stand-in has no prefix cache and no queue: its pace is the same whoever it serves, so latency here is the
router's own and cache_aware's gain cannot show. What can: how often a turn reaches the engine that served its
conversation's last turn (where a real engine holds that prefix in its cache), how evenly the engines are loaded,
and how many render calls each request costs. The setting stays off by default until a measurement on real
hardware says a policy pays (docs/llm-serving.md, "In-pool routing").
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from common.bench.results_file import update_section
from common.server_process import REPO_ROOT, free_port, serve_process
from llm_bench.load import WORDS, one_request
from llm_bench.machine import cpu_name, load_average
from llm_bench.report import Timing, percentile, table
from llm_bench.standin_engine import STANDIN_MODEL, TOKEN_TEXT, Pace, StandinEngine
from tools.gateway_overhead import pod_gateway_env

RESULTS_KEY = "llm router policies, stand-in engines"
ROUTER_BIN = REPO_ROOT / ".cache" / "vllm-router-venv" / "bin" / "vllm-router"
BASELINE = "round_robin"
POLICIES = (BASELINE, "power_of_two", "cache_aware")
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Run:
    """One policy's run in one round."""

    ttft_ms_p50: float
    e2e_ms_p50: float
    same_engine: float  # share of later turns served where their conversation's last turn was
    busiest_share: float  # the busiest engine's share of the requests
    renders_per_request: float
    errors: int


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m tools.router_policies", description=__doc__.split("\n")[0])
    parser.add_argument("--engines", type=int, default=3, help="stand-in engines, each behind its own gateway")
    parser.add_argument("--sessions", type=int, default=8, help="conversations in flight at once")
    parser.add_argument("--conversations", type=int, default=16, help="conversations per policy and round")
    parser.add_argument("--turns", type=int, default=5, help="turns per conversation")
    parser.add_argument("--system-words", type=int, default=300, help="each conversation's opening prompt")
    parser.add_argument("--turn-words", type=int, default=60, help="words a turn adds besides the last answer")
    parser.add_argument("--output-tokens", type=int, default=24, help="tokens per answer")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="the stand-ins' time to the first token")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="the stand-ins' time between tokens")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every policy once")
    parser.add_argument("--router", type=Path, default=ROUTER_BIN, help="the vllm-router command")
    parser.add_argument("--results-file", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    if min(args.engines, args.sessions, args.conversations, args.turns, args.rounds) < 1 or args.engines < 2:
        parser.error("--engines must be at least 2; --sessions, --conversations, --turns, --rounds positive")
    if not args.router.exists():
        parser.error(f"no router at {args.router}: docs/llm-serving.md 'In-pool routing' says how to install it")
    return args


@contextmanager
def gateways(urls: list[str], folder: Path) -> Iterator[list[str]]:
    """A gateway with its pod's settings and the render routes on in front of each engine URL; their URLs."""
    with ExitStack() as stack:
        started = []
        for url in urls:
            env, _ = pod_gateway_env(url, 0)
            env = {k: v for k, v in env.items() if k not in ("HOST", "PORT")} | {"RENDER_ROUTES": "true"}
            env["METRICS"] = "off"  # its own records are not what this measures
            port = free_port()
            server = stack.enter_context(
                serve_process(
                    [sys.executable, "-m", "llm_gateway"],
                    env=env,
                    log=folder / f"gateway-{port}.log",
                    port=port,
                    ready_path="/readiness",
                    ready_timeout_s=READY_TIMEOUT_S,
                )
            )
            started.append(server.url)
        yield started


def router_argv(router: Path, policy: str, port: int, workers: list[str]) -> list[str]:
    """The router on the loopback with `policy` over `workers` (the synth's health check on the gateways' /readiness;
    a static worker list in place of Kubernetes discovery)."""
    return [str(router), "--host=127.0.0.1", f"--port={port}", f"--policy={policy}", "--worker-urls", *workers,
            "--health-check-endpoint=/readiness", f"--prometheus-port={free_port()}",
            "--log-level=warning"]  # fmt: skip


async def conversation(client: httpx.AsyncClient, args: argparse.Namespace, name: str, rng: random.Random) -> list:
    """One conversation's turns, in order: (turn, prompt, timing)."""
    text = f"{name} " + " ".join(rng.choice(WORDS) for _ in range(args.system_words))
    turns = []
    for turn in range(args.turns):
        text += " " + " ".join(rng.choice(WORDS) for _ in range(args.turn_words))
        timing = await one_request(client, STANDIN_MODEL, text, args.output_tokens)
        turns.append((turn, text, timing))
        text += TOKEN_TEXT * args.output_tokens  # the answer, as the client sends it back next turn
    return turns


async def workload(url: str, args: argparse.Namespace, seed: str) -> list[tuple[str, int, str, Timing]]:
    """Every conversation against `url`, --sessions at a time: (conversation, turn, prompt, timing) per request."""
    rng = random.Random(seed)  # noqa: S311  # prompt text, not a secret
    names = [f"c{rng.randrange(10**9)}" for _ in range(args.conversations)]
    done: list[tuple[str, int, str, Timing]] = []
    limits = httpx.Limits(max_connections=args.sessions + 2)
    timeout = httpx.Timeout(60.0, read=None)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:

        async def session() -> None:
            while names:
                name = names.pop()
                done.extend((name, t, p, timing) for t, p, timing in await conversation(client, args, name, rng))

        await asyncio.gather(*(session() for _ in range(args.sessions)))
    return done


def summarize(requests: list[tuple[str, int, str, Timing]], engines: list[StandinEngine]) -> Run:
    """The run's figures: latency medians, the engines each conversation's turns reached, renders per request."""
    served_by = {prompt: index for index, engine in enumerate(engines) for prompt in engine.prompts}
    ok = [timing for _, _, _, timing in requests if timing.ok]
    ttfts = [t.ttft_s * 1000 for t in ok if t.ttft_s is not None]
    where = {(name, turn): served_by.get(prompt) for name, turn, prompt, _ in requests}
    later = [(name, turn) for name, turn in where if turn > 0 and where.get((name, turn - 1)) is not None]
    same = sum(where[key] == where[(key[0], key[1] - 1)] for key in later)
    counts = [len(engine.prompts) for engine in engines]
    return Run(
        ttft_ms_p50=percentile(ttfts, 50),
        e2e_ms_p50=percentile([t.e2e_s * 1000 for t in ok], 50),
        same_engine=same / len(later) if later else float("nan"),
        busiest_share=max(counts) / max(1, sum(counts)),
        renders_per_request=sum(engine.renders for engine in engines) / max(1, len(requests)),
        errors=len(requests) - len(ok),
    )


@contextmanager
def engines_in_thread(args: argparse.Namespace) -> Iterator[tuple[list[StandinEngine], list[str]]]:
    """--engines stand-ins on free ports, served by a thread of their own (this thread blocks while a server
    process starts, and the gateways' readiness asks the engines); the engines and their URLs."""
    engines = [StandinEngine(Pace(args.ttft_ms / 1000, args.gap_ms / 1000), record=True) for _ in range(args.engines)]
    ports = [free_port() for _ in engines]
    loop = asyncio.new_event_loop()
    started = [asyncio.Event() for _ in engines]

    async def serve_all() -> None:
        await asyncio.gather(*(e.serve("127.0.0.1", p, s) for e, p, s in zip(engines, ports, started, strict=True)))

    task = loop.create_task(serve_all())
    thread = threading.Thread(target=lambda: loop.run_until_complete(asyncio.wait([task])), daemon=True)
    thread.start()
    try:

        async def ready() -> None:
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in started)), 10)

        asyncio.run_coroutine_threadsafe(ready(), loop).result(timeout=15)
        yield engines, [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=10)


def measure(args: argparse.Namespace, folder: Path) -> dict[str, list[Run]]:
    """The engines, a gateway in front of each; every round, each policy's router in turn."""
    runs: dict[str, list[Run]] = {policy: [] for policy in POLICIES}
    with engines_in_thread(args) as (engines, urls), gateways(urls, folder) as workers:
        for round_index in range(args.rounds):
            shift = round_index % len(POLICIES)
            for policy in POLICIES[shift:] + POLICIES[:shift]:
                runs[policy].append(one_run(args, policy, workers, engines, folder, str(round_index)))
    return runs


def one_run(
    args: argparse.Namespace, policy: str, workers: list[str], engines: list[StandinEngine], folder: Path, seed: str
) -> Run:
    """The workload through a fresh router with `policy` (no prefix tree left from another run); the same seed, so
    the same conversations, for every policy of a round."""
    port = free_port()
    argv = router_argv(args.router, policy, port, workers)
    with serve_process(argv, log=folder / f"router-{policy}.log", port=port, ready_path="/readiness"):
        for engine in engines:
            engine.prompts.clear()
            engine.renders = 0
        requests = asyncio.run(workload(f"http://127.0.0.1:{port}", args, seed))
    run = summarize(requests, engines)
    print(f"{policy}: {run}", file=sys.stderr)
    return run


def rows(runs: dict[str, list[Run]]) -> list[list[object]]:
    """Medians over the rounds, per policy; TTFT also as the median of per-round differences to round robin."""
    out: list[list[object]] = []
    base = runs[BASELINE]
    for policy, policy_runs in runs.items():
        added = [r.ttft_ms_p50 - b.ttft_ms_p50 for r, b in zip(policy_runs, base, strict=True)]
        out.append(
            [
                policy,
                round(statistics.median(r.ttft_ms_p50 for r in policy_runs), 1),
                round(statistics.median(added), 1),
                round(statistics.median(r.e2e_ms_p50 for r in policy_runs), 1),
                f"{statistics.median(r.same_engine for r in policy_runs):.0%}",
                f"{statistics.median(r.busiest_share for r in policy_runs):.0%}",
                round(statistics.median(r.renders_per_request for r in policy_runs), 2),
                sum(r.errors for r in policy_runs),
            ]
        )
    return out


def section(args: argparse.Namespace, command: str, started: str, loads: tuple[str, str], result: str) -> str:
    """The markdown section for docs/benchmarks.md."""
    requests = args.conversations * args.turns
    return "\n\n".join(
        [
            "### LLM router policies against round robin (stand-in engines, multi-turn)",
            f"Measured {started} with `{command}` on {cpu_name()}; load average (1 min) {loads[0]} at the start, "
            f"{loads[1]} at the end (a machine shared with other work). vllm-router 0.1.17 (the pinned wheel) in "
            f"front of {args.engines} gateways (`python -m llm_gateway`, their pod's settings, RENDER_ROUTES on), each "
            f"in front of a pace stand-in (first token after {args.ttft_ms:g} ms, one every {args.gap_ms:g} ms, "
            f"{args.output_tokens} tokens an answer). Per policy and round {args.conversations} conversations of "
            f"{args.turns} turns ({requests} streamed completions), {args.sessions} at a time: an opening prompt of "
            f"{args.system_words} words, each turn the last prompt plus its answer plus {args.turn_words} words. "
            f"{args.rounds} rounds, the policies' order rotating, a fresh router per run; medians over the rounds.",
            "A stand-in has no prefix cache and no queue, so the latencies are the router's own and cache_aware's "
            "gain cannot show here. *Same engine*: the share of later turns that reached the engine of their "
            "conversation's last turn, where a real engine would find the history in its prefix cache. *Busiest*: "
            f"the most loaded engine's share of the requests (even: {1 / args.engines:.0%}). *Renders*: render calls "
            "the engines got per request (cache_aware renders each request on every pod).",
            result,
            "The setting stays off by default: this says what each policy does to placement and what it costs the "
            "pods, not what it saves; that takes real engines with their prefix caches on real hardware.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Measure, print and (with --results-file) write the section."""
    args = parse_args(argv)
    command = "python -m tools.router_policies " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    started_load = load_average()
    with tempfile.TemporaryDirectory() as folder:
        runs = measure(args, Path(folder))
    header = ["policy", "TTFT p50 (ms)", "TTFT p50 vs round robin (ms)", "end-to-end p50 (ms)", "same engine",
              "busiest engine", "renders / request", "errors"]  # fmt: skip
    text = section(args, command, started, (started_load, load_average()), table(header, rows(runs)))
    print(text)
    if args.results_file:
        update_section(args.results_file, RESULTS_KEY, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
