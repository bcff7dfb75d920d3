"""`python -m tools.gateway_overhead`: the gateway's own overhead, measured apart from the engine.

    python -m tools.gateway_overhead                                   # gateway vs direct
    python -m tools.gateway_overhead --router /tmp/router-venv/bin/vllm-router --results-file docs/benchmarks.md

`python -m llm_bench`'s overhead part measures the real engine, and a CPU engine on shared cores changes pace
whatever is in front of it. Here the engine is the pace stand-in (llm_bench/standin_engine.py: a first token
after --ttft-ms, then one every --gap-ms), so any latency beyond the pace is the proxy's. The stand-in and this
client run on one core, the proxy on the other (taskset), so the proxy's CPU never competes with what measures it.

In front of one stand-in: nothing (direct), the gateway (`python -m llm_gateway` on its image's Python and lock
(tools/gateway_image_venv.py), with its pod's settings, from cdk/llm/workload.py's gateway_env: METRICS=emf,
since there is no CloudWatch here, and sign-in off), reaching the stand-in over a Unix socket as it reaches vLLM
on its pod, the same gateway over loopback TCP and, with
--router, vLLM's Rust router (`vllm-router`, never a dependency of the project) as the peer; --proxy adds any
other candidate. At each stream count every target runs once per round, the order rotating between rounds so
that drift falls on all; the table gives medians over the rounds of the per-round differences to direct: TTFT
p50 and p99 added, tokens/s as a share of direct, and the proxy's CPU time per 1,000 tokens (/proc, its child
processes included). Then a full-speed run (a stand-in that streams as fast as it can) gives tokens/s per core
of proxy CPU time, and with --router each proxy's against the router's, for information: at the deployed rate
(a few hundred tokens a second per pod) a few per cent of a proxy core either way is noise (issue 39).

Targets: added TTFT p50 <= 2 ms and p99 <= 5 ms, tokens/s >= 99.8 % of direct (the paced rows).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from common.bench.results_file import update_section
from common.server_process import REPO_ROOT, free_port
from llm_bench.cpu_time import cpu_times
from llm_bench.machine import cpu_name, load_average
from llm_bench.report import Timing, percentile, table
from llm_bench.standin_engine import STANDIN_MODEL
from llm_bench.stream_client import StreamLoad, run_streams
from llm_gateway.engine_address import UNIX_SCHEME
from tools.gateway_image_venv import VenvUnavailable, image_python

TTFT_P50_TARGET_MS = 2.0
TTFT_P99_TARGET_MS = 5.0
TOKENS_SHARE_TARGET = 0.998
RESULTS_KEY = "llm gateway overhead, stand-in engine"
READY_TIMEOUT_S = 60.0
DIRECT = "direct"
GATEWAY = "gateway"
GATEWAY_TCP = "gateway over TCP"
"""The same gateway reaching the stand-in over loopback TCP instead of its pod's Unix socket: what the socket buys."""
ROUTER = "vllm-router"


@dataclass(frozen=True)
class Target:
    """What the client calls: the stand-in itself, or a proxy in front of it (with its process, for its CPU)."""

    name: str
    url: str
    pid: int | None = None


@dataclass(frozen=True)
class Run:
    """One target's run in one round."""

    ttft_ms_p50: float
    ttft_ms_p99: float
    tokens: int
    tokens_per_s: float
    cpu_s: float  # the proxy's CPU seconds during the run (nan for direct)
    cpu_system_s: float  # of them, in the kernel (system time)
    wall_s: float
    errors: int  # requests not answered 200 to their end
    refused: int  # of them, refused with a 429 (an admission bound)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m tools.gateway_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,8,22,64", help="comma-separated concurrent stream counts")
    # 8: with 4, one noisy round moved the 22-stream tokens/s share of either proxy below the target
    parser.add_argument("--rounds", type=int, default=8, help="rounds per stream count (the order rotates)")
    # 6: with 3 (a round of about 2 s) one stall of the shared machine moved a round's tokens/s share by up to 0.6 %
    # (22 streams, 16 rounds: 99.19-100.28 %); with 6 the same rounds stayed within 99.65-100.06 %
    parser.add_argument("--requests-per-stream", type=int, default=6, help="requests per target and round, per stream")
    parser.add_argument("--min-requests", type=int, default=16, help="at least this many per target and round")
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="the stand-in's time to the first token")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="the stand-in's time between tokens")
    parser.add_argument("--output-tokens", type=int, default=64, help="tokens per answer (paced runs)")
    parser.add_argument("--input-words", type=int, default=512, help="prompt words (the stand-in: a token each)")
    parser.add_argument("--full-speed-streams", default="8,64", help="stream counts of the full-speed run ('' skips)")
    parser.add_argument("--full-speed-s", type=float, default=5.0, help="seconds per target and round at full speed")
    # 10: a round's ratio of the gateway's tokens per core to the router's ranged 98-104 % within one run (pinned, this
    # machine, 2026-11-27), and whole runs of 4 or 6 rounds (each proxy's own median) 88-106 %
    parser.add_argument("--full-speed-rounds", type=int, default=10)
    parser.add_argument("--full-speed-tokens", type=int, default=256, help="tokens per answer at full speed")
    parser.add_argument("--router", type=Path, help="the vllm-router command (pip install vllm-router elsewhere)")
    parser.add_argument(
        "--proxy",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="another proxy to measure beside them (repeatable): a command line with {port} (where it listens) and "
        "{upstream} (the stand-in's URL); ready when its /v1/models answers",
    )
    parser.add_argument("--cores", help="two CPUs: the client's and stand-in's, then the proxy's (default: the first "
                        "two this process may use)")  # fmt: skip
    parser.add_argument(
        "--gateway-python",
        type=Path,
        help="the interpreter the gateway runs on (default: its image's Python and lock, a venv built on first use: "
        "tools/gateway_image_venv.py)",
    )
    parser.add_argument("--results-file", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    usable = sorted(os.sched_getaffinity(0))
    cores = [int(c) for c in args.cores.split(",")] if args.cores else usable[:2]
    if len(cores) != 2 or not set(cores) <= set(usable) or cores[0] == cores[1]:
        parser.error(f"needs two different CPUs this process may use (usable: {usable})")
    args.core_lists = cores
    if args.rounds < 1 or args.full_speed_rounds < 1 or args.output_tokens < 2:
        parser.error("--rounds and --full-speed-rounds must be positive, --output-tokens at least 2")
    if args.router is not None and not os.access(args.router, os.X_OK):
        parser.error(f"--router {args.router} is not an executable")
    if args.gateway_python is not None and not os.access(args.gateway_python, os.X_OK):
        parser.error(f"--gateway-python {args.gateway_python} is not an executable")
    names = [spec.partition("=")[0] for spec in args.proxy]
    taken = {DIRECT, GATEWAY, GATEWAY_TCP, ROUTER}
    if (
        any("=" not in spec for spec in args.proxy)
        or not all(names)
        or len(set(names)) < len(names)
        or taken & {*names}
    ):
        parser.error(f"--proxy takes NAME=COMMAND, each name once and none of {', '.join(sorted(taken))}")
    return args


def pod_gateway_env(upstream_url: str, port: int) -> tuple[dict[str, str], str]:
    """The gateway's environment on its pod (cdk/llm/workload.py, default cdk.json), made local: loopback
    addresses, METRICS=emf (the same recording; JSON lines instead of PutMetricData) and sign-in off; and a few
    words on where it came from, for the section.

    Where the CDK app cannot be imported (a machine with only the gateway's run-time requirements), the
    gateway runs on its own defaults (llm_gateway/settings.py) with the same local changes, and says so."""
    local = {"HOST": "127.0.0.1", "PORT": str(port), "UPSTREAM_URL": upstream_url, "AUTH": "off"}
    try:
        from cdk.accelerators import NVIDIA  # the CDK only where this runner runs, not in the image
        from cdk.build import resolve_context
        from cdk.config.llm import LlmConfig
        from cdk.config.serving import ServingConfig
        from cdk.llm.workload import gateway_env
    except ImportError as exc:
        print(f"the CDK app is not importable ({exc}): the gateway runs on its defaults", file=sys.stderr)
        return local | {"METRICS": "emf", "CHAT_PAGE": "false"}, "its defaults (the CDK app was not installed)"

    context = resolve_context(json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"])
    llm = LlmConfig.from_context(context | {"llmEnabled": True})
    if llm is None:
        raise RuntimeError("cdk.json's LLM settings did not load")
    env = {item["name"]: item["value"] for item in gateway_env(NVIDIA, llm, ServingConfig.from_context(context), "")}
    env.pop("AWS_REGION", None)
    env.pop("AWS_DEFAULT_REGION", None)
    return env | local | {"METRICS": "emf" if env.get("METRICS") != "off" else "off"}, "its pod's settings"


def gateway_interpreter(chosen: Path | None) -> tuple[str, str]:
    """The interpreter the gateway runs on, and a few words on it for the section: `chosen`, else the gateway
    image's own Python and lock (as on its pod: aiohttp writes a request's body in the same step on Python 3.12 and
    later, a step later on 3.11, which at 64 streams starting together added milliseconds to their first tokens).
    Where that venv cannot be made here, this environment's Python, and the section says so."""
    if chosen is not None:
        return str(chosen), f"Python {_python_version(str(chosen))} (`--gateway-python {chosen}`)"
    try:
        python = str(image_python())
    except VenvUnavailable as exc:
        print(f"the gateway runs on this environment's Python: {exc}", file=sys.stderr)
        return sys.executable, f"Python {_python_version(sys.executable)} of this environment, not its image's ({exc})"
    return python, f"its image's Python {_python_version(python)} and lock (llm_gateway/requirements.lock)"


def _python_version(python: str) -> str:
    command = [python, "-c", "import platform; print(platform.python_version())"]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


@contextmanager
def process(
    command: list[str], core: int, log: Path, ready_url: str, env: dict[str, str] | None = None
) -> Iterator[int]:
    """Start `command` on CPU `core` (its threads included); yield its process id once `ready_url` answers 200."""
    with log.open("w", encoding="utf-8") as out:
        child = subprocess.Popen(
            ["taskset", "-c", str(core), *command],
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"{shlex.join(command)} exited ({child.returncode}); see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{shlex.join(command)} did not answer {ready_url}; see {log}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield child.pid  # taskset execs the command: the same process
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@contextmanager
def stack(args: argparse.Namespace, ttft_ms: float, gap_ms: float, folder: Path) -> Iterator[list[Target]]:
    """The stand-in at this pace on the first core and the proxies in front of it on the second."""
    client_core, proxy_core = args.core_lists
    with ExitStack() as stack:
        port = free_port()
        standin = f"http://127.0.0.1:{port}"
        # The gateway reaches the stand-in as it reaches vLLM on its pod, over a Unix socket; the router over TCP.
        standin_socket = f"{UNIX_SCHEME}{folder / 'engine.sock'}"
        engine = [sys.executable, "-m", "llm_bench.standin_engine", f"--port={port}", f"--ttft-ms={ttft_ms}",
                  f"--uds={folder / 'engine.sock'}"]  # fmt: skip
        stack.enter_context(process([*engine, f"--gap-ms={gap_ms}"], client_core, folder / "standin.log",
                                    f"{standin}/health"))  # fmt: skip
        targets = [Target(DIRECT, standin)]
        command = [args.gateway_interpreter, "-m", "llm_gateway"]
        for name, upstream in ((GATEWAY, standin_socket), (GATEWAY_TCP, standin)):
            port = free_port()
            gateway = f"http://127.0.0.1:{port}"
            env, args.gateway_settings = pod_gateway_env(upstream, port)
            log = folder / f"{name.replace(' ', '-')}.log"
            pid = stack.enter_context(process(command, proxy_core, log, f"{gateway}/readiness", env))
            targets.append(Target(name, gateway, pid))
        if args.router is not None:
            port = free_port()
            router = f"http://127.0.0.1:{port}"
            command = [str(args.router), "--host=127.0.0.1", f"--port={port}", "--worker-urls", standin,
                       "--policy=round_robin", f"--prometheus-port={free_port()}", "--log-level=warning"]  # fmt: skip
            pid = stack.enter_context(process(command, proxy_core, folder / "router.log", f"{router}/v1/models"))
            targets.append(Target(ROUTER, router, pid))
        for spec in args.proxy:
            name, _, line = spec.partition("=")
            port = free_port()
            command = shlex.split(line.format(port=port, upstream=standin))
            url = f"http://127.0.0.1:{port}"
            pid = stack.enter_context(process(command, proxy_core, folder / f"{name}.log", f"{url}/v1/models"))
            targets.append(Target(name, url, pid))
        yield targets


def tree_cpu_times(pid: int) -> tuple[float, float]:
    """CPU time of process `pid` and every process below it, in user and in system mode: a server may run its
    workers as child processes (granian does), and their time is the proxy's too."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    user = system = 0.0
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            times = cpu_times(current)
        except OSError:
            continue
        user, system = user + times[0], system + times[1]
        todo += children.get(current, [])
    return user, system


def run_client(coroutine: Coroutine[Any, Any, list[Timing]]) -> list[Timing]:
    """Run the client's coroutine on uvloop where installed (less of the shared core), else asyncio."""
    try:
        import uvloop  # optional: the gateway's image has it, a bare environment may not

        runner: Callable[[Coroutine[Any, Any, list[Timing]]], list[Timing]] = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(coroutine)


def measure(target: Target, load: StreamLoad, seed: str) -> Run:
    """One run of `load` against `target`, with the proxy's CPU time over it."""
    before = tree_cpu_times(target.pid) if target.pid else (math.nan, math.nan)
    timings = run_client(run_streams(target.url, STANDIN_MODEL, load, seed=seed))
    after = tree_cpu_times(target.pid) if target.pid else (math.nan, math.nan)
    system = after[1] - before[1]
    cpu = after[0] - before[0] + system
    done = [t for t in timings if t.ok]
    ttfts = [t.ttft_s * 1000 for t in done if t.ttft_s is not None]
    tokens = sum(t.output_tokens for t in done)
    wall = max(t.end for t in timings) - min(t.start for t in timings)
    refused = sum(1 for t in timings if t.status == 429)
    p50, p99 = percentile(ttfts, 50), percentile(ttfts, 99)
    return Run(p50, p99, tokens, tokens / wall, cpu, system, wall, len(timings) - len(done), refused)


def rounds(targets: list[Target], load: StreamLoad, count: int, label: str) -> dict[str, list[Run]]:
    """`count` rounds of every target in rotating order (each after one warm-up run); the runs by target."""
    warm_up = StreamLoad(load.streams, 4, load.input_words, requests=load.streams)
    for target in targets:
        measure(target, warm_up, seed=f"{label} warm-up {target.name}")
    runs: dict[str, list[Run]] = {target.name: [] for target in targets}
    for round_ in range(count):
        shift = round_ % len(targets)
        for target in targets[shift:] + targets[:shift]:
            runs[target.name].append(measure(target, load, seed=f"{label} {round_} {target.name}"))
    return runs


def paced_rows(args: argparse.Namespace, targets: list[Target]) -> list[list[object]]:
    """The paced table: per stream count and proxy, medians over rounds of the differences to direct."""
    rows: list[list[object]] = []
    for streams in [int(s) for s in args.streams.split(",") if s]:
        requests = max(args.min_requests, args.requests_per_stream * streams)
        load = StreamLoad(streams, args.output_tokens, args.input_words, requests=requests)
        print(f"paced: {streams} streams, {requests} requests per target and round", file=sys.stderr)
        runs = rounds(targets, load, args.rounds, f"paced {streams}")
        direct = runs[DIRECT]
        for target in targets[1:]:
            proxied = runs[target.name]
            added_p50 = statistics.median(p.ttft_ms_p50 - d.ttft_ms_p50 for p, d in zip(proxied, direct, strict=True))
            added_p99 = statistics.median(p.ttft_ms_p99 - d.ttft_ms_p99 for p, d in zip(proxied, direct, strict=True))
            share = statistics.median(p.tokens_per_s / d.tokens_per_s for p, d in zip(proxied, direct, strict=True))
            cpu = statistics.median(p.cpu_s * 1e6 / p.tokens if p.tokens else math.nan for p in proxied)
            errors = sum(r.errors for r in proxied) + sum(r.errors for r in direct)
            refused = sum(r.refused for r in proxied)
            met = (
                added_p50 <= TTFT_P50_TARGET_MS
                and added_p99 <= TTFT_P99_TARGET_MS
                and share >= TOKENS_SHARE_TARGET
                and errors == 0
            )
            rows.append(
                [
                    streams,
                    target.name,
                    statistics.median(d.ttft_ms_p50 for d in direct),
                    f"{added_p50:+.2f}",
                    f"{added_p99:+.2f}",
                    statistics.median(d.tokens_per_s for d in direct),
                    f"{share:.2%}",
                    cpu,
                    f"{errors} ({refused} 429)" if refused else errors,
                    "yes" if met else "no",
                ]
            )
            print(f"  {target.name}: TTFT p50 {added_p50:+.2f} ms, p99 {added_p99:+.2f} ms, tok/s {share:.2%}, "
                  f"{cpu:.1f} CPU ms / 1k tokens", file=sys.stderr)  # fmt: skip
    return rows


def full_speed_rows(args: argparse.Namespace, targets: list[Target]) -> list[list[object]]:
    """The full-speed table: tokens/s, the proxy's CPU use and tokens/s per proxy core, medians over rounds; and each
    proxy's tokens per core against the router's, as the median over rounds of the ratio within a round (the
    machine's pace drifts between rounds, and both proxies of one round met the same drift)."""
    rows: list[list[object]] = []
    for streams in [int(s) for s in args.full_speed_streams.split(",") if s]:
        load = StreamLoad(streams, args.full_speed_tokens, args.input_words, duration_s=args.full_speed_s)
        print(f"full speed: {streams} streams, {args.full_speed_s:g} s per target and round", file=sys.stderr)
        runs = rounds(targets, load, args.full_speed_rounds, f"full {streams}")
        per_core = {name: [r.tokens / r.cpu_s if r.cpu_s > 0 else math.nan for r in runs[name]] for name in runs}
        for target in targets:
            mine = runs[target.name]
            errors, refused = sum(r.errors for r in mine), sum(r.refused for r in mine)
            errors_cell = f"{errors} ({refused} 429)" if refused else errors
            tokens_per_s = statistics.median(r.tokens_per_s for r in mine)
            if target.name == DIRECT:
                rows.append([streams, target.name, tokens_per_s, "n/a", "n/a", "n/a", "", errors_cell])
                continue
            cores = statistics.median(r.cpu_s / r.wall_s for r in mine)
            kernel = statistics.median(r.cpu_system_s / r.cpu_s if r.cpu_s > 0 else math.nan for r in mine)
            ratio = None
            if ROUTER in per_core and target.name != ROUTER:
                ratio = statistics.median(p / r for p, r in zip(per_core[target.name], per_core[ROUTER], strict=True))
            versus = "" if ratio is None else f"{ratio:.1%}"
            median_per_core = statistics.median(per_core[target.name])
            rows.append(
                [streams, target.name, tokens_per_s, cores, f"{kernel:.0%}", median_per_core, versus, errors_cell]
            )
            print(f"  {target.name}: {tokens_per_s:,.0f} tok/s, {cores:.2f} proxy cores, per core {versus or '-'} of "
                  "the router's", file=sys.stderr)  # fmt: skip
    return rows


def section(args: argparse.Namespace, command: str, started: str, loads: tuple[str, str], paced: str, full: str) -> str:
    """The markdown section for docs/benchmarks.md."""
    client_core, proxy_core = args.core_lists
    peers = ["vLLM's Rust router (`vllm-router`, `--policy round_robin`)"] if args.router else []
    peers += [f"`{spec.partition('=')[0]}` (`{spec.partition('=')[2]}`)" for spec in args.proxy]
    router = f"and {', '.join(peers)} " if peers else ""
    return "\n\n".join(
        [
            "### LLM gateway overhead, apart from the engine (pace stand-in)",
            f"Measured {started} with `{command}` on {cpu_name()}; load average (1 min) {loads[0]} at the start, "
            f"{loads[1]} at the end (a shared machine: the figures are as steady as that). The gateway "
            f"(`python -m llm_gateway` on {args.gateway_python_words}, with {args.gateway_settings}, METRICS=emf, "
            "sign-in off, reaching the stand-in "
            f"over a Unix socket as it reaches vLLM on its pod; `{GATEWAY_TCP}`: the same over loopback TCP, for "
            f"reference) {router}in front of llm_bench/standin_engine.py, which streams a first token after "
            f"{args.ttft_ms:g} ms and one every {args.gap_ms:g} ms ({args.output_tokens} tokens, prompts of "
            f"{args.input_words} words; {args.requests_per_stream} requests a stream, at least {args.min_requests}, "
            "per target and round, each stream sending its next when the last ended); the stand-in and "
            f"the client on CPU {client_core}, the proxy on CPU {proxy_core}. Each stream count: a warm-up, then "
            f"{args.rounds} rounds of every target in rotating order; medians over the rounds of the differences to "
            f"direct in the same round. Targets: TTFT p50 +{TTFT_P50_TARGET_MS:g} ms and p99 "
            f"+{TTFT_P99_TARGET_MS:g} ms at most, tokens/s at least {TOKENS_SHARE_TARGET:.1%} of direct. Errors: "
            "requests of all rounds not answered 200 to their end (429: refused by the proxy's admission bound, "
            "which a client holding as many streams as the bound can meet when its next request comes in before "
            "the proxy has let go of the last one).",
            paced,
            f"**Full speed** (the stand-in streams as fast as it can, {args.full_speed_tokens} tokens an answer, "
            f"{args.full_speed_s:g} s per target and round, {args.full_speed_rounds} rounds; medians). Tokens/s is "
            "bounded by the client's and stand-in's core; tokens per second of proxy CPU time is the proxy's own "
            "figure, and its share of system time the part spent in the kernel (the socket reads and writes). Per "
            "core, of the router's: the median over the rounds of the proxy's tokens per core over the router's in "
            "the same round, for information (no target: at the deployed rate a few per cent of a proxy core "
            "either way is noise).",
            full,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Pin, start the stand-in and the proxies, measure, print and write the section."""
    args = parse_args(argv)
    command = "python -m tools.gateway_overhead " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    started_load = load_average()
    args.gateway_interpreter, args.gateway_python_words = gateway_interpreter(args.gateway_python)
    usable = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {args.core_lists[0]})  # this client beside the stand-in
    try:
        with tempfile.TemporaryDirectory() as folder:
            with stack(args, args.ttft_ms, args.gap_ms, Path(folder)) as targets:
                paced = paced_rows(args, targets)
            full: list[list[object]] = []
            if args.full_speed_streams.strip(","):
                with stack(args, 0.0, 0.0, Path(folder)) as targets:
                    full = full_speed_rows(args, targets)
    finally:
        os.sched_setaffinity(0, usable)
    paced_table = table(
        ["streams", "proxy", "TTFT p50 direct (ms)", "TTFT p50 added (ms)", "TTFT p99 added (ms)", "tok/s direct",
         "tok/s share of direct", "proxy CPU ms / 1k tokens", "errors", "within target"],
        paced,
    )  # fmt: skip
    full_table = table(
        ["streams", "target", "tok/s", "proxy CPU (cores)", "of it in the kernel", "tok/s per proxy core",
         "per core, of the router's", "errors"],
        full,
    ) if full else "(skipped: --full-speed-streams '')"  # fmt: skip
    text = section(args, command, started, (started_load, load_average()), paced_table, full_table)
    print(text)
    if args.results_file:
        update_section(args.results_file, RESULTS_KEY, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
