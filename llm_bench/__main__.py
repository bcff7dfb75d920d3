"""`python -m llm_bench`: the LLM benchmark (make bench-llm).

    python -m llm_bench --local                        # start make run-llm's stack and measure it
    python -m llm_bench --engine-url http://127.0.0.1:8001 --gateway-url http://127.0.0.1:8000 \
        --tokenizer meta-llama/Llama-2-13b-chat-hf --device "inf2.48xlarge, TP 8" --max-num-seqs 24
    python -m llm_bench --gateway-url http://llm-neuron.sd --token-file /run/secrets/llm-bench/token \
        --sweep-client builtin ...                     # the benchmark Job on the cluster (cdk/llm/benchmark_job.py)

Four parts, each printed as a table and written together as one section of --results-file:
1. the guide's shape through the gateway (default 3,072 input / 512 output tokens, 22 concurrent);
2. the gateway's overhead: the same load on vLLM directly and through the gateway at 1 and 8 streams,
   in rounds of alternating order (direct first, then gateway first) so that drift of a shared machine
   falls on both; targets: TTFT p50 +2 % at most, output tokens/s -1 % at most. Only with --engine-url
   (on the cluster vLLM listens on its pod's Unix socket, so the Job skips it);
3. 8x max-num-seqs offered at once through the gateway: every request must complete (0 lost, 0 5xx);
4. a concurrency sweep through the gateway, with vLLM's own `vllm bench serve` or (--sweep-client builtin,
   where vLLM is not installed) this benchmark's own client; the best goodput among its points where 90 % of
   the requests meet the SLO is what one replica sustains within it, the figure for the cost routing's
   llmRequestsPerMinute* setting, and with --price-per-hour its cost per million output tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from common.bench.results_file import update_section
from common.bench.sweep_plot import write_sweep_plot
from llm_bench.cpu_time import cpu_seconds
from llm_bench.job import TOKEN_FLAG
from llm_bench.load import Load, first_model, run_load
from llm_bench.machine import cpu_name, load_average
from llm_bench.plots import LLM_SWEEP
from llm_bench.report import Slo, change_pct, summarize, table
from llm_bench.sweep import RESULT_KEYS, run_bench_serve
from llm_bench.token import TokenFile

TTFT_TARGET_PCT = 2.0
THROUGHPUT_TARGET_PCT = -1.0
OVERLOAD_FACTOR = 8
# The share of a sweep point's requests that must meet the SLO for the point to count as "within it": the TTFT
# alarm (alarmTtftP90Ms) is on the 90th percentile.
SLO_SHARE = 0.9
READY_POLL_S = 2.0


@dataclass(frozen=True)
class Target:
    """The servers under test."""

    engine_url: str | None  # None: no overhead comparison
    gateway_url: str
    vllm: Path
    tokenizer: str
    env: dict[str, str]
    gateway_pid: int | None = None  # --local: for the gateway's CPU time per token
    auth: TokenFile | None = None  # the gateway's sign-in (the engine has none)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m llm_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--local", action="store_true", help="start `python -m llm_local` (make run-llm) and use it")
    parser.add_argument(
        "--engine-threads",
        type=int,
        help="--local: the CPU engine's threads (OMP_NUM_THREADS; default every core). On a small machine one "
        "core left to the gateway and this client keeps them from waiting on the engine's busy threads",
    )
    parser.add_argument("--engine-url", help="vLLM's OpenAI server, called directly (without it: no overhead part)")
    parser.add_argument("--gateway-url", help="the gateway in front of it")
    parser.add_argument(
        TOKEN_FLAG, type=Path, help="a file holding the gateway's bearer token, read again for each request"
    )
    parser.add_argument("--model", help="served model name (default: the first of /v1/models)")
    parser.add_argument("--tokenizer", help="for vllm bench serve (default: the local model's folder, or --model)")
    parser.add_argument("--vllm", type=Path, help="the vllm command (default: the local CPU environment's)")
    parser.add_argument("--device", help="what it runs on, for the results (default: this machine's CPU)")
    parser.add_argument("--input-tokens", type=int, default=3072)
    parser.add_argument("--output-tokens", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=22)
    parser.add_argument("--requests", type=int, help="requests of the shape run (default: 2x concurrency)")
    parser.add_argument("--overhead-concurrency", default="1,8", help="comma-separated stream counts")
    parser.add_argument(
        "--overhead-requests", type=int, default=16, help="requests per target, round and count (at least 2x the count)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="overhead rounds (alternating order)")
    parser.add_argument("--max-num-seqs", type=int, help="the engine's --max-num-seqs (default: the local engine's)")
    parser.add_argument("--sweep", default="1,2,4,8,16", help="concurrencies for vllm bench serve ('' skips it)")
    parser.add_argument("--sweep-prompts", type=int, default=16, help="prompts per sweep point")
    parser.add_argument("--sweep-target", choices=("gateway", "engine"), default="gateway", help="what the sweep calls")
    parser.add_argument(
        "--sweep-client",
        choices=("vllm", "builtin"),
        default="vllm",
        help="the sweep's client: `vllm bench serve`, or this benchmark's own (where vLLM is not installed)",
    )
    parser.add_argument("--price-per-hour", type=float, help="USD per hour of what serves: cost per million tokens")
    parser.add_argument(
        "--per-replica-setting", help="the setting the sweep's best goodput is for (e.g. llmRequestsPerMinuteNeuron)"
    )
    parser.add_argument("--slo-ttft-ms", type=float, default=2000.0, help="goodput SLO: time to first token")
    parser.add_argument("--slo-tpot-ms", type=float, default=100.0, help="goodput SLO: time per output token")
    parser.add_argument("--results-file", type=Path, help="write the section into this markdown file")
    parser.add_argument("--results-key", help="the section's key in --results-file (default: model, device and shape)")
    parser.add_argument(
        "--wait-s",
        type=float,
        default=60.0,
        help="how long the gateway may refuse connections or answer 5xx at the start (a new pod's network policy)",
    )
    args = parser.parse_args(argv)
    if not args.local and not args.gateway_url:
        parser.error("give --local, or --gateway-url (and --engine-url for the overhead part)")
    if args.sweep_target == "engine" and not (args.local or args.engine_url):
        parser.error("--sweep-target engine needs --engine-url")
    if args.price_per_hour is not None and args.price_per_hour <= 0:
        parser.error("--price-per-hour must be positive")
    if args.input_tokens < 1 or args.output_tokens < 2 or args.concurrency < 1:
        parser.error("--input-tokens, --output-tokens (at least 2) and --concurrency must be positive")
    return args


def overhead(
    args: argparse.Namespace, target: Target, engine_url: str, model: str, slo: Slo
) -> tuple[str, list[list[object]]]:
    """Part 2: direct vs through the gateway, per stream count; the table and its rows."""
    rows: list[list[object]] = []
    targets = {"direct": (engine_url, None), "gateway": (target.gateway_url, target.auth)}
    for concurrency in [int(c) for c in args.overhead_concurrency.split(",") if c]:
        load = Load(args.input_tokens, args.output_tokens, concurrency, max(args.overhead_requests, 2 * concurrency))
        warm_up = Load(args.input_tokens, 4, concurrency, concurrency)
        for name, (url, auth) in targets.items():  # warm-up, not measured: connections, first batches
            asyncio.run(run_load(url, model, warm_up, seed=f"overhead warm-up {concurrency} {name}", auth=auth))
        runs: dict[str, list[dict[str, float]]] = {"direct": [], "gateway": []}
        for round_ in range(args.rounds):
            order = ["direct", "gateway"] if round_ % 2 == 0 else ["gateway", "direct"]
            for name in order:
                url, auth = targets[name]
                cpu_before = cpu_seconds(target.gateway_pid) if target.gateway_pid else math.nan
                # Prompts of their own per target and round: vLLM's prefix cache would serve the second target's
                # prefill of prompts the first had sent (finding 11: a spurious +518 % TTFT at 1 stream).
                seed = f"overhead {concurrency} {round_} {name}"
                figures = summarize(asyncio.run(run_load(url, model, load, seed=seed, auth=auth)), slo)
                if name == "gateway" and target.gateway_pid:
                    tokens = figures["output_tokens_per_s"] * figures["duration_s"]
                    figures["gateway_cpu_ms_per_1k_tokens"] = (
                        (cpu_seconds(target.gateway_pid) - cpu_before) * 1e6 / tokens
                    )
                runs[name].append(figures)
        direct, gateway = (
            {key: sum(r[key] for r in runs[name]) / len(runs[name]) for key in ("ttft_ms_p50", "output_tokens_per_s")}
            for name in ("direct", "gateway")
        )
        errors = sum(r["errors"] for name in runs for r in runs[name])
        cpu = [r.get("gateway_cpu_ms_per_1k_tokens", math.nan) for r in runs["gateway"]]
        ttft = change_pct(direct["ttft_ms_p50"], gateway["ttft_ms_p50"])
        tps = change_pct(direct["output_tokens_per_s"], gateway["output_tokens_per_s"])
        met = ttft <= TTFT_TARGET_PCT and tps >= THROUGHPUT_TARGET_PCT and errors == 0
        rows.append(
            [
                concurrency,
                direct["ttft_ms_p50"],
                gateway["ttft_ms_p50"],
                f"{ttft:+.1f} %",
                direct["output_tokens_per_s"],
                gateway["output_tokens_per_s"],
                f"{tps:+.1f} %",
                sum(cpu) / len(cpu),
                errors,
                "yes" if met else "no",
            ]
        )
        print(f"overhead at {concurrency}: TTFT p50 {ttft:+.1f} %, output tokens/s {tps:+.1f} %", file=sys.stderr)
    header = [
        "streams",
        "TTFT p50 direct (ms)",
        "TTFT p50 gateway (ms)",
        "TTFT change",
        "output tok/s direct",
        "output tok/s gateway",
        "tok/s change",
        "gateway CPU ms / 1k tokens",
        "errors",
        f"within +{TTFT_TARGET_PCT:g} % / {THROUGHPUT_TARGET_PCT:g} %",
    ]
    return table(header, rows), rows


def run(args: argparse.Namespace, target: Target, command: str) -> str:
    """All four parts; returns the markdown section (also printed)."""
    slo = Slo(args.slo_ttft_ms, args.slo_tpot_ms)
    wait_for_gateway(target, args.wait_s)
    model = args.model or asyncio.run(first_model(target.gateway_url, target.auth))
    started_load = load_average()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    shape = Load(args.input_tokens, args.output_tokens, args.concurrency, args.requests or 2 * args.concurrency)
    print(f"shape run: {shape}", file=sys.stderr)
    main = summarize(asyncio.run(run_load(target.gateway_url, model, shape, seed="shape", auth=target.auth)), slo)
    ours = [
        "completed", "errors", "input_tokens_mean", "output_tokens_mean", "ttft_ms_p50", "ttft_ms_p90",
        "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99", "tpot_ms_mean", "tpot_ms_p50", "e2e_s_p50",
        "output_tokens_per_s", "requests_per_min", "goodput_requests_per_min",
    ]  # fmt: skip
    llmperf = [key for key in main if key.startswith("results_")]
    shape_table = table(["metric", "value"], [[key, main[key]] for key in ours])
    llmperf_table = table(["llmperf column", "value"], [[key, main[key]] for key in llmperf])

    if not target.engine_url:
        overhead_table = "(skipped: no --engine-url; on the cluster vLLM answers only on its pod's Unix socket)"
    elif not args.overhead_concurrency.strip(","):
        overhead_table = "(skipped: --overhead-concurrency '')"
    else:
        print("gateway overhead", file=sys.stderr)
        overhead_table, _ = overhead(args, target, target.engine_url, model, slo)

    offered = OVERLOAD_FACTOR * args.max_num_seqs
    overload_load = Load(args.input_tokens, args.output_tokens, offered, offered)
    print(f"overload: {offered} at once", file=sys.stderr)
    overloaded = run_load(target.gateway_url, model, overload_load, seed="overload", auth=target.auth)
    overload = summarize(asyncio.run(overloaded), slo)
    overload_table = table(
        ["offered at once", "completed", "lost", "5xx", "429", "TTFT p50 (ms)", "TTFT p99 (ms)", "0 lost, 0 5xx"],
        [
            [
                offered,
                overload["completed"],
                overload["lost"],
                overload["status_5xx"],
                overload["status_429"],
                overload["ttft_ms_p50"],
                overload["ttft_ms_p99"],
                "yes" if overload["lost"] == 0 and overload["status_5xx"] == 0 else "no",
            ]
        ],
    )

    sweep_rows = [sweep_point(args, target, model, slo, int(c)) for c in args.sweep.split(",") if c]
    sweep_table = table(
        ["concurrency", "completed", "failed", "TTFT p50 (ms)", "TTFT p99 (ms)", "ITL p50 (ms)", "TPOT p50 (ms)",
         "output tok/s", "requests/min", "goodput req/min", "USD / M output tokens"],
        sweep_rows,
    )  # fmt: skip
    sweep_client = "`vllm bench serve`" if args.sweep_client == "vllm" else "this benchmark's own client"

    device = args.device or cpu_name()
    section = "\n\n".join(
        [
            f"### LLM serving: `{model}` on {device}, {args.input_tokens} in / {args.output_tokens} out tokens",
            f"Measured {started} with `{command}`; load average (1 min) {started_load} at the start, "
            f"{load_average()} at the end. Goodput SLO: TTFT <= {slo.ttft_ms:g} ms and TPOT <= {slo.tpot_ms:g} ms. "
            f"Through the gateway unless said otherwise; `ignore_eos`, so every answer is {args.output_tokens} "
            "tokens. ITL is the gap between streamed tokens (vLLM's meaning), TPOT is (end-to-end - TTFT) / "
            "(output tokens - 1); llmperf's inter-token latency is end-to-end / output tokens.",
            f"**Shape run** ({shape.concurrency} concurrent, {shape.requests} requests, closed loop):",
            shape_table,
            llmperf_table,
            f"**Gateway overhead** (at least {args.overhead_requests} requests, or 2x the streams, per target and "
            f"round after a warm-up; {args.rounds} rounds of alternating order; means of the rounds; prompts of "
            "their own per target and round, so that vLLM's prefix cache serves neither from the other). Here the "
            "gateway shares the engine's CPU cores, so its own CPU time per streamed token competes with the "
            "engine's; on an accelerator the engine's step does not. The gateway's CPU time per 1,000 output "
            "tokens (--local only, from /proc) is the figure that does not depend on the machine's other load:",
            overhead_table,
            f"**{OVERLOAD_FACTOR}x max-num-seqs** ({args.max_num_seqs}) offered at once:",
            overload_table,
            f"**Concurrency sweep** with {sweep_client} (through the {args.sweep_target}; random prompts, "
            f"{args.sweep_prompts} a point or the concurrency):",
            sweep_table if sweep_rows else "(skipped: --sweep '')",
            at_the_slo(args, sweep_rows),
        ]
    )
    print(section)
    if args.results_file:
        key = args.results_key or f"llm {model} {device} {args.input_tokens}/{args.output_tokens}"
        update_section(args.results_file, key, section)
        print(f"plot: {write_sweep_plot(args.results_file, LLM_SWEEP)}", file=sys.stderr)
    return section


def wait_for_gateway(target: Target, wait_s: float) -> None:
    """Until the gateway answers /v1/models: a connection refused or a 5xx is waited out for `wait_s` (a Job's new
    pod may not pass its network policy yet, a pod may be restarting); a 4xx (sign-in) stops at once."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            response = httpx.get(f"{target.gateway_url.rstrip('/')}/v1/models", auth=target.auth, timeout=10)
            if response.status_code < 500:
                response.raise_for_status()
                return
            problem = f"answered {response.status_code}"
        except httpx.TransportError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise RuntimeError(f"{target.gateway_url} did not answer within {wait_s:g} s: {problem}")
        time.sleep(READY_POLL_S)


def sweep_point(args: argparse.Namespace, target: Target, model: str, slo: Slo, concurrency: int) -> list[object]:
    """One row of the sweep at `concurrency` (columns as the sweep's table)."""
    print(f"sweep at {concurrency} ({args.sweep_client})", file=sys.stderr)
    point = Load(args.input_tokens, args.output_tokens, concurrency, max(args.sweep_prompts, concurrency))
    url, auth = (target.gateway_url, target.auth) if args.sweep_target == "gateway" else (target.engine_url, None)
    if url is None:
        raise ValueError("the sweep's target has no URL")
    if args.sweep_client == "builtin":
        figures = summarize(asyncio.run(run_load(url, model, point, seed=f"sweep {concurrency}", auth=auth)), slo)
        counts = [int(figures["completed"]), int(figures["errors"])]
        latencies = [figures[k] for k in ("ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "tpot_ms_p50")]
        tokens_per_s, per_min = figures["output_tokens_per_s"], figures["requests_per_min"]
        goodput = figures["goodput_requests_per_min"]
    else:
        env = dict(target.env)
        if auth is not None:  # vllm bench serve sends OPENAI_API_KEY as the bearer token
            env["OPENAI_API_KEY"] = auth.token()
        figures = run_bench_serve(target.vllm, url, model, target.tokenizer, point, slo, env)
        counts = [int(figures["completed"]), int(figures["failed"])]
        latencies = [figures[k] for k in RESULT_KEYS[2:-3]]
        tokens_per_s, per_min = figures["output_throughput"], figures["request_throughput"] * 60
        goodput = figures["request_goodput"] * 60
    return [concurrency, *counts, *latencies, tokens_per_s, per_min, goodput, cost_per_million(args, tokens_per_s)]


def cost_per_million(args: argparse.Namespace, tokens_per_s: float) -> float:
    """USD per million output tokens at `tokens_per_s` and --price-per-hour (nan without a price)."""
    if args.price_per_hour is None or not tokens_per_s > 0:
        return math.nan
    return args.price_per_hour / (tokens_per_s * 3600) * 1e6


def at_the_slo(args: argparse.Namespace, sweep_rows: list[list[object]]) -> str:
    """What this deployment sustains within the SLO: the best goodput among the sweep points where at least
    SLO_SHARE of the requests met it (so the TTFT alarm, on the 90th percentile, stays quiet there)."""
    if not sweep_rows:
        return ""

    def share(row: list[object]) -> float:
        per_min, goodput = float(row[-3]), float(row[-2])
        return goodput / per_min if per_min > 0 and not math.isnan(goodput) else 0.0

    within = [row for row in sweep_rows if share(row) >= SLO_SHARE]
    if not within:
        return f"**At the SLO:** no sweep point had {SLO_SHARE:.0%} of its requests within the SLO."
    best = max(within, key=lambda row: float(row[-2]))
    setting = f" (`{args.per_replica_setting}`)" if args.per_replica_setting else ""
    cost = float(best[-1])
    priced = "" if math.isnan(cost) else f", USD {cost:,.2f} per million output tokens at USD {args.price_per_hour:g}/h"
    return (
        f"**At the SLO:** {float(best[-2]):,.1f} requests/min within it{setting}, at concurrency {best[0]}, "
        f"{share(best):.0%} of requests within it ({float(best[-4]):,.1f} output tok/s{priced})."
    )


def failure(exc: Exception) -> str:
    """What stopped the run, in one line: the server's own message for an HTTP error status."""
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        try:
            message = response.json().get("error", {}).get("message") or response.text
        except ValueError:
            message = response.text
        return f"{response.request.method} {response.request.url} answered {response.status_code}: {message[:300]}"
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    """Parse, start the local stack when asked, run, write."""
    args = parse_args(argv)
    command = "python -m llm_bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    auth = TokenFile(args.token_file) if args.token_file else None
    if not args.local:
        args.max_num_seqs = args.max_num_seqs or 256
        target = Target(
            args.engine_url,
            args.gateway_url,
            args.vllm or Path("vllm"),
            args.tokenizer or args.model or "",
            dict(os.environ),
            auth=auth,
        )
        try:
            run(args, target, command)
        except (httpx.HTTPError, RuntimeError) as exc:
            print(f"llm_bench: {failure(exc)}", file=sys.stderr)
            return 1
        return 0
    from llm_bench.local import local_stack
    from llm_local.engine import EngineOptions, build_tiny_model, engine_environment
    from llm_local.vllm_env import ensure_env

    env = ensure_env()
    args.max_num_seqs = args.max_num_seqs or EngineOptions().max_num_seqs
    tokenizer = args.tokenizer or str(build_tiny_model(env))
    with (
        tempfile.TemporaryDirectory() as folder,
        local_stack(Path(folder) / "llm-local.log", args.engine_threads) as (
            engine,
            gateway,
            pid,
        ),
    ):
        target = Target(engine, gateway, args.vllm or env / "bin" / "vllm", tokenizer, engine_environment(), pid, auth)
        run(args, target, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
