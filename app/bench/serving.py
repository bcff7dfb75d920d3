"""Serving overhead and batching gain: HTTP latency and throughput at several concurrencies, next to
the bare pipeline call measured in the same run.

By default it starts the service in this process (built-in model, CPU unless BACKEND says otherwise)
on a free loopback port; `--url` measures a server that is already running instead (then the bare
pipeline rows are left out, since the pipeline lives in that other process).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.pipeline import git_commit, software_versions
from app.bench.plots import SERVING_SWEEP
from app.bench.report import format_table, percentile
from common.bench.results_file import update_section
from common.bench.sweep_plot import write_sweep_plot


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the serving benchmark."""
    parser.add_argument("--url", help="benchmark this running server instead of starting one")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16], help="client counts")
    parser.add_argument("--requests-per-client", type=int, default=6, help="requests each client sends")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", type=int, default=128, help="image width and height")
    parser.add_argument("--model-id", default=os.environ.get("MODEL_ID", "builtin:tiny"))
    parser.add_argument("--max-batch-size", type=int, default=4)
    parser.add_argument("--batch-wait-ms", type=float, default=20.0)
    parser.add_argument("--bare-repeats", type=int, default=6, help="bare pipeline calls per batch-size row")
    parser.add_argument("--pairs", type=int, default=20, help="bare/HTTP pairs for the 1-client overhead")
    parser.add_argument("--results-file", type=Path, default=None, help="markdown file to write the figures into")


@dataclass(frozen=True)
class Row:
    """One measured configuration."""

    label: str
    concurrency: int
    latencies_s: list[float]
    images: int
    wall_s: float
    failures: int = 0

    @property
    def images_per_s(self) -> float:
        return self.images / self.wall_s if self.wall_s else float("nan")


def measure_bare(backend: object, steps: int, size: int, batch: int, repeats: int) -> Row:
    """Call the backend directly, no HTTP and no queue: the floor the service is compared with."""
    from app.backends.base import GenerationParams

    guidance = backend.family.default_guidance  # type: ignore[attr-defined]  # as an HTTP request without one
    params = [GenerationParams("a lighthouse at dusk", "", steps, guidance, size, size, seed) for seed in range(batch)]
    backend.generate(params)  # type: ignore[attr-defined]  # this shape's first call may be slower
    latencies = []
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        backend.generate(params)  # type: ignore[attr-defined]
        latencies.append(time.perf_counter() - t0)
    return Row(f"bare pipeline, batch {batch}", 1, latencies, repeats * batch, time.perf_counter() - started)


def measure_paired(
    url: str, run_bare: Callable[..., Any], backend: Any, steps: int, size: int, pairs: int
) -> tuple[Row, Row, list[float], list[float]]:
    """One client: a bare batch-1 call and the same request over HTTP, alternated `pairs` times.

    Alternating makes both sides of each pair see the same machine: on a shared machine whose load
    drifts, separate runs of bare calls and HTTP requests would measure the drift, not the service.
    `run_bare(fn, *args)` runs the bare call on the service's pipeline thread, so both sides run the
    model on the same thread. Returns the bare row, the HTTP row, each pair's HTTP/bare ratio, and each
    HTTP request's own overhead: its latency over the pipeline call inside it (`X-Pipeline-Ms`), which
    no change of machine load between two calls can blur.
    """
    import httpx

    from app.backends.base import GenerationParams

    params = GenerationParams("a lighthouse at dusk", "", steps, backend.family.default_guidance, size, size, 1)
    body = {"prompt": params.prompt, "steps": steps, "width": size, "height": size, "seed": params.seed}
    bare_s: list[float] = []
    http_s: list[float] = []
    ratios: list[float] = []
    own: list[float] = []
    failures = 0
    with httpx.Client(base_url=url, timeout=600) as client:
        run_bare(backend.generate, [params])  # warm both paths first
        client.post("/v1/generate", json=body)
        for _ in range(pairs):
            t0 = time.perf_counter()
            run_bare(backend.generate, [params])
            bare = time.perf_counter() - t0
            t0 = time.perf_counter()
            response = client.post("/v1/generate", json=body)
            http = time.perf_counter() - t0
            bare_s.append(bare)
            if response.status_code != 200:
                failures += 1
                continue
            http_s.append(http)
            ratios.append(http / bare)
            own.append(http / (float(response.headers["x-pipeline-ms"]) / 1000.0))
    return (
        Row("bare pipeline, batch 1", 1, bare_s, len(bare_s), sum(bare_s)),
        Row("HTTP, 1 client(s)", 1, http_s, len(http_s), sum(http_s), failures),
        ratios,
        own,
    )


async def measure_http(url: str, concurrency: int, per_client: int, steps: int, size: int) -> Row:
    """`concurrency` clients, each sending `per_client` requests back to back."""
    import httpx

    latencies: list[float] = []
    failures = 0

    async def client_loop(client: httpx.AsyncClient, client_id: int) -> None:
        nonlocal failures
        for i in range(per_client):
            body = {"prompt": "a lighthouse at dusk", "steps": steps, "width": size, "height": size}
            t0 = time.perf_counter()
            response = await client.post("/v1/generate", json={**body, "seed": client_id * 1000 + i})
            if response.status_code == 200:
                latencies.append(time.perf_counter() - t0)
            else:
                failures += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client, c) for c in range(concurrency)))
        wall = time.perf_counter() - started
    return Row(f"HTTP, {concurrency} client(s)", concurrency, latencies, len(latencies), wall, failures)


def render(rows: list[Row], baseline: Row | None) -> str:
    """The markdown table; ratios are against the bare batch-1 call when it was measured."""
    headers = ["mode", "p50 ms", "p90 ms", "p99 ms", "images/s", "p50 / bare", "images/s / bare", "failed"]
    table = []
    for row in rows:
        p50 = percentile(row.latencies_s, 50) * 1000
        table.append(
            [
                row.label,
                p50,
                percentile(row.latencies_s, 90) * 1000,
                percentile(row.latencies_s, 99) * 1000,
                row.images_per_s,
                p50 / (percentile(baseline.latencies_s, 50) * 1000) if baseline else float("nan"),
                row.images_per_s / baseline.images_per_s if baseline else float("nan"),
                row.failures,
            ]
        )
    return format_table(headers, table)


def run(args: argparse.Namespace) -> int:
    """Measure and print the table; exit 1 if any HTTP request failed."""
    if args.url:
        rows = [
            asyncio.run(measure_http(args.url, c, args.requests_per_client, args.steps, args.size))
            for c in args.concurrency
        ]
        print(render(rows, None))
        return 1 if any(r.failures for r in rows) else 0

    import httpx

    from app.bench.inprocess import bench_cache_dir, serve_in_thread, wait_ready
    from app.server import create_app
    from app.settings import load_settings

    settings = load_settings(
        model_id=args.model_id,
        model_cache_dir=bench_cache_dir(),
        max_batch_size=args.max_batch_size,
        batch_wait_ms=args.batch_wait_ms,
        queue_size=max(args.concurrency) * 2,  # the benchmark measures batching, not refusals
        max_steps=max(args.steps, 1),
        default_steps=min(args.steps, 25),
        max_size=max(args.size, 1024),
        ui=False,
    )
    app = create_app(settings)
    service = app.state.service
    with serve_in_thread(app) as url:
        if not wait_ready(url, service):
            return 1
        backend = service.backend
        bare, one_client, ratios, own = measure_paired(
            url, service.run_blocking_on_pipeline_thread, backend, args.steps, args.size, args.pairs
        )
        batch = service.batcher.max_batch_size
        rows = [bare]
        if batch > 1:
            rows.append(measure_bare(backend, args.steps, args.size, batch, max(2, args.bare_repeats // batch)))
        for concurrency in args.concurrency:
            if concurrency == 1:
                rows.append(one_client)
                continue
            rows.append(asyncio.run(measure_http(url, concurrency, args.requests_per_client, args.steps, args.size)))
        info = httpx.get(f"{url}/v1/info").json()
    overhead = (
        f"- Serving overhead at 1 client: **{(percentile(own, 50) - 1) * 100:+.1f} %**, the median over "
        f"{len(own)} requests of the client's latency over the pipeline call inside the request "
        f"(`X-Pipeline-Ms`); against the alternated bare calls: {(percentile(ratios, 50) - 1) * 100:+.1f} % "
        f"(median of pair ratios), {overhead_percent(one_client, bare):+.1f} % (ratio of the rows' p50s)."
    )
    body = "\n".join(
        [
            f"### serving: `{args.model_id}` on {info['backend']} ({info.get('device')}), {args.size}x{args.size}, "
            f"{args.steps} steps, MAX_BATCH_SIZE {batch}, BATCH_WAIT_MS {args.batch_wait_ms:g}",
            "",
            f"- Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC at commit {git_commit()} on "
            f"{os.cpu_count()} CPUs; {software_versions()}.",
            f"- 1 client: {args.pairs} bare calls and HTTP requests alternated; more clients: "
            f"{args.requests_per_client} requests per client; batches formed by size: "
            f"{info['batching']['batches_by_size']}.",
            f"- Command: `python -m app.bench serving --model-id {args.model_id} "
            f"--concurrency {' '.join(map(str, args.concurrency))} "
            f"--requests-per-client {args.requests_per_client} --steps {args.steps} --size {args.size} "
            f"--max-batch-size {args.max_batch_size} --batch-wait-ms {args.batch_wait_ms:g} "
            f"--bare-repeats {args.bare_repeats} --pairs {args.pairs}`",
            overhead,
            "",
            render(rows, bare),
        ]
    )
    print(body)
    if args.results_file is not None:
        key = f"serving {info['backend']} {args.model_id} {args.size}x{args.size} {args.steps}"
        update_section(args.results_file, key, body)
        print(f"written to {args.results_file} and its plot {write_sweep_plot(args.results_file, SERVING_SWEEP)}")
    return 1 if any(r.failures for r in rows) else 0


def overhead_percent(service: Row, bare: Row) -> float:
    """How much longer (in %) a request through the service takes than the bare pipeline call, at p50."""
    return (percentile(service.latencies_s, 50) / percentile(bare.latencies_s, 50) - 1.0) * 100.0
