"""`python -m app.bench breaking-point`: the load one service sustains within its latency SLO.

Against a running service (`--url`), or one it serves in-process for `--model-id` (e.g. a tiny built-in
of each model family on the CPU), it ramps the number of concurrent clients (1, 2, 4, ... up to
`--max-concurrency`). At each level every client sends `POST /v1/generate` back to back for
`--level-seconds`; a 429 (queue full) counts as rejected, anything else not 200 as failed. The ramp
stops at the first level whose p90 latency passes `--slo-ms` (SLO_P90_MS) or whose rejected and
failed share passes `--max-error-share`. The last level within the SLO gives the sustained
requests per minute: the figure a KEDA target per pod and a cost-routing weight are set from, and,
with `--price-per-hour`, the cost per 1,000 images.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.plots import BREAKING_POINT_SWEEP
from app.bench.report import format_table, percentile
from app.settings import load_settings
from common.bench.cost import cost_per_1000_images
from common.bench.results_file import update_section
from common.bench.sweep_plot import write_sweep_plot

BACKOFF_ON_REJECT_S = 0.05  # a client told "queue full" waits this long, so it does not spin


@dataclass(frozen=True)
class LevelResult:
    """What one concurrency level achieved."""

    concurrency: int
    completed: int
    rejected: int
    failed: int
    elapsed_s: float
    latencies_ms: tuple[float, ...]  # successful requests only

    @property
    def per_minute(self) -> float:
        """Completed requests per minute over the level's duration."""
        return 60.0 * self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def p(self, q: float) -> float:
        """The q-th percentile of successful requests' latency, in milliseconds."""
        return percentile(self.latencies_ms, q)

    @property
    def error_share(self) -> float:
        """Rejected and failed requests as a share of all answered ones."""
        total = self.completed + self.rejected + self.failed
        return (self.rejected + self.failed) / total if total else 1.0

    def within(self, slo_ms: float, max_error_share: float) -> bool:
        """Whether this level meets the SLO: some completed, p90 under it, few errors."""
        return self.completed > 0 and self.p(90) <= slo_ms and self.error_share <= max_error_share


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `breaking-point` mode's options to `parser`."""
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the running service")
    parser.add_argument(
        "--model-id", default=None, help="serve this MODEL_ID in-process on the CPU instead of using --url"
    )
    parser.add_argument("--slo-ms", type=float, default=None, help="p90 latency limit (default: SLO_P90_MS)")
    parser.add_argument("--max-concurrency", type=int, default=64)
    parser.add_argument("--level-seconds", type=float, default=60.0, help="how long each level runs")
    parser.add_argument("--max-error-share", type=float, default=0.01, help="rejected+failed share allowed")
    parser.add_argument("--price-per-hour", type=float, default=None, help="the machine's price, for cost/1,000")
    parser.add_argument("--prompt", default="a photograph of an astronaut riding a horse")
    parser.add_argument("--steps", type=int, default=None, help="default: the service's")
    parser.add_argument("--width", type=int, default=None, help="default: the service's")
    parser.add_argument("--height", type=int, default=None, help="default: the service's")
    parser.add_argument("--request-timeout", type=float, default=300.0, help="seconds before a request fails")
    parser.add_argument("--results-file", type=Path, default=None, help="markdown file to write the figures into")


def concurrency_levels(maximum: int) -> list[int]:
    """1, 2, 4, ... doubling up to `maximum`, which is always the last level."""
    levels = [1]
    while levels[-1] * 2 < maximum:
        levels.append(levels[-1] * 2)
    if maximum > levels[-1]:
        levels.append(maximum)
    return levels


def _payload(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    payload: dict[str, Any] = {"prompt": args.prompt, "seed": seed}
    for name in ("steps", "width", "height"):
        if getattr(args, name) is not None:
            payload[name] = getattr(args, name)
    return payload


async def run_level(client: Any, args: argparse.Namespace, concurrency: int, seeds: itertools.count) -> LevelResult:
    """Keep `concurrency` requests in flight for `args.level_seconds`; in-flight ones finish."""
    import httpx

    latencies: list[float] = []
    counts = {"rejected": 0, "failed": 0}
    started = time.perf_counter()
    deadline = started + args.level_seconds

    async def client_loop() -> None:
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            try:
                response = await client.post(f"{args.url.rstrip('/')}/v1/generate", json=_payload(args, next(seeds)))
            except httpx.HTTPError:
                counts["failed"] += 1
                continue
            if response.status_code == 200:
                latencies.append(1000.0 * (time.perf_counter() - sent))
            elif response.status_code == 429:
                counts["rejected"] += 1
                await asyncio.sleep(BACKOFF_ON_REJECT_S)
            else:
                counts["failed"] += 1

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return LevelResult(
        concurrency=concurrency,
        completed=len(latencies),
        rejected=counts["rejected"],
        failed=counts["failed"],
        elapsed_s=time.perf_counter() - started,
        latencies_ms=tuple(latencies),
    )


async def ramp(args: argparse.Namespace, slo_ms: float) -> list[LevelResult]:
    """Run levels of growing concurrency until one misses the SLO (that one is included)."""
    import httpx

    levels = concurrency_levels(args.max_concurrency)
    limits = httpx.Limits(max_connections=levels[-1], max_keepalive_connections=levels[-1])
    results: list[LevelResult] = []
    seeds = itertools.count()
    async with httpx.AsyncClient(timeout=args.request_timeout, limits=limits) as client:
        for concurrency in levels:
            result = await run_level(client, args, concurrency, seeds)
            results.append(result)
            print(
                f"concurrency {concurrency}: {result.per_minute:.1f}/min, p90 {result.p(90):.0f} ms, "
                f"{result.rejected} rejected, {result.failed} failed",
                flush=True,
            )
            if not result.within(slo_ms, args.max_error_share):
                break
    return results


def sustained(results: Sequence[LevelResult], slo_ms: float, max_error_share: float) -> LevelResult | None:
    """The highest-throughput level that met the SLO (levels past the first miss never ran)."""
    good = [r for r in results if r.within(slo_ms, max_error_share)]
    return max(good, key=lambda r: r.per_minute) if good else None


def _service_info(url: str) -> str:
    import httpx

    try:
        response = httpx.get(f"{url.rstrip('/')}/v1/info", timeout=10.0)
    except httpx.HTTPError as exc:
        return f"unavailable ({type(exc).__name__})"
    if response.status_code != 200:
        return f"unavailable (HTTP {response.status_code})"
    return json.dumps(response.json(), sort_keys=True)


def summary(results: Sequence[LevelResult], slo_ms: float, args: argparse.Namespace) -> str:
    """The levels' table and the sustained figures, as markdown."""
    rows = [
        [
            r.concurrency,
            r.completed,
            r.rejected,
            r.failed,
            r.per_minute,
            r.p(50),
            r.p(90),
            r.p(99),
            "yes" if r.within(slo_ms, args.max_error_share) else "no",
        ]
        for r in results
    ]
    headers = ["clients", "done", "429", "failed", "req/min", "p50 ms", "p90 ms", "p99 ms", "within SLO"]
    lines = [format_table(headers, rows), ""]
    best = sustained(results, slo_ms, args.max_error_share)
    if best is None:
        lines.append(f"No level met the SLO (p90 <= {slo_ms:.0f} ms, errors <= {args.max_error_share:.0%}).")
        return "\n".join(lines)
    lines.append(
        f"Sustained: **{best.per_minute:.1f} requests/min** at {best.concurrency} concurrent clients "
        f"(p90 {best.p(90):.0f} ms <= SLO {slo_ms:.0f} ms): the KEDA target per pod and the routing weight input."
    )
    if args.price_per_hour is not None:
        cost = cost_per_1000_images(args.price_per_hour, best.per_minute)
        lines.append(f"Cost per 1,000 images at {args.price_per_hour:g}/hour: **{cost:.3f}**.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Ramp the load (against --url, or a service of --model-id started here); 0 when some level met the SLO."""
    if args.model_id is None:
        return _run_against(args, f"breaking-point {args.url}")
    from app.bench.inprocess import bench_cache_dir, serve_in_thread, wait_ready
    from app.server import create_app

    settings = load_settings(
        backend="cpu",
        model_id=args.model_id,
        model_cache_dir=bench_cache_dir(),
        queue_size=max(args.max_concurrency * 2, 32),  # a ramp past the queue measures refusals, not the SLO
        ui=False,
    )
    app = create_app(settings)
    with serve_in_thread(app) as url:
        if not wait_ready(url, app.state.service):
            return 1
        args.url = url
        return _run_against(args, f"breaking-point {args.model_id} cpu")


def _run_against(args: argparse.Namespace, key: str) -> int:
    slo_ms = args.slo_ms if args.slo_ms is not None else load_settings().slo_p90_ms
    info = _service_info(args.url)
    results = asyncio.run(ramp(args, slo_ms))
    body = "\n".join(
        [
            f"### breaking point: {args.model_id or args.url}, SLO p90 {slo_ms:.0f} ms",
            "",
            f"- Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {args.level_seconds:g} s per level.",
            f"- Service: {info}",
            "",
            summary(results, slo_ms, args),
        ]
    )
    print(body)
    if args.results_file is not None:
        update_section(args.results_file, f"{key} {slo_ms:.0f}ms", body)
        plot = write_sweep_plot(args.results_file, BREAKING_POINT_SWEEP)
        print(f"written to {args.results_file} and its plot {plot}")
    return 0 if sustained(results, slo_ms, args.max_error_share) else 1
