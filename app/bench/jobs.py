"""Jobs beside interactive traffic: /v1/generate latency idle and under a job backlog, and the backlog's outcome.

Starts the service in this process (built-in model, CPU unless BACKEND says otherwise, JOBS=local
in a fresh directory) on a free loopback port, then:
1. idle: sequential /v1/generate requests;
2. loaded: submits all jobs at once (faster than they can run), sends the same sequential
   /v1/generate requests while they run, then waits for every job.
It reports p50/p90 of both phases, the bound the design promises, and the jobs lost or duplicated.

The bound: a job enters the batcher only while no request waits there, so an interactive request
waits at most for the batch already in the pipeline. Loaded p90 <= idle p90 + the bare time of one
batch of JOBS_CONCURRENCY images (measured in the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from app.bench.report import format_table, percentile
from common.bench.results_file import update_section


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the jobs benchmark."""
    parser.add_argument("--jobs", type=int, default=24, help="jobs submitted at once")
    parser.add_argument("--probes", type=int, default=16, help="sequential /v1/generate requests per phase")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", type=int, default=128, help="image width and height")
    parser.add_argument("--jobs-concurrency", type=int, default=4, help="JOBS_CONCURRENCY")
    parser.add_argument("--model-id", default=os.environ.get("MODEL_ID", "builtin:tiny"))
    parser.add_argument("--results", type=Path, help="also write the table into this markdown file")


def run(args: argparse.Namespace) -> int:
    """Measure, print the table (and write it to --results); exit 1 if a job was lost or duplicated."""
    import httpx

    from app.bench.inprocess import bench_cache_dir, serve_in_thread, wait_ready
    from app.bench.serving import measure_bare
    from app.server import create_app
    from app.settings import load_settings

    jobs_dir = Path(tempfile.mkdtemp(prefix="sd-bench-jobs-"))
    settings = load_settings(
        model_id=args.model_id,
        model_cache_dir=bench_cache_dir(),
        max_steps=max(args.steps, 1),
        default_steps=min(args.steps, 25),
        max_size=max(args.size, 1024),
        ui=False,
        jobs="local",
        jobs_dir=jobs_dir,
        jobs_concurrency=args.jobs_concurrency,
        jobs_poll_s=1.0,
    )
    body = {"prompt": "a lighthouse at dusk", "steps": args.steps, "width": args.size, "height": args.size}
    app = create_app(settings)
    service = app.state.service
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=600) as client:
        if not wait_ready(url, service):
            return 1

        def probe() -> list[float]:
            latencies = []
            for i in range(args.probes):
                started = time.perf_counter()
                response = client.post("/v1/generate", json={**body, "seed": i})
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)
            return latencies

        batch_s = measure_bare(service.backend, args.steps, args.size, args.jobs_concurrency, 1).latencies_s[0]
        idle = probe()
        started = time.perf_counter()
        ids = [client.post("/v1/jobs", json={**body, "seed": 10_000 + i}).json()["id"] for i in range(args.jobs)]
        submit_s = time.perf_counter() - started
        loaded = probe()
        states = Counter()
        for job_id in ids:
            while (state := client.get(f"/v1/jobs/{job_id}").json()["state"]) not in ("succeeded", "failed"):
                time.sleep(0.1)
            states[state] += 1
        backlog_s = time.perf_counter() - started
        info = client.get("/v1/info").json()
    notices = Counter(
        json.loads(line)["job_id"] for line in (jobs_dir / "notifications.jsonl").read_text().splitlines()
    )
    lost = args.jobs - states["succeeded"]
    duplicated = sum(count - 1 for count in notices.values() if count > 1)

    idle_p90 = percentile(idle, 90)
    bound = idle_p90 + batch_s
    rows = [
        ["idle", percentile(idle, 50) * 1000, idle_p90 * 1000, 1.0],
        [
            f"{args.jobs} jobs queued",
            percentile(loaded, 50) * 1000,
            percentile(loaded, 90) * 1000,
            percentile(loaded, 90) / idle_p90,
        ],
    ]
    table = format_table(["/v1/generate", "p50 ms", "p90 ms", "p90 / idle p90"], rows)
    summary = (
        f"backend {info['backend']}, model {info['model']}, {args.size}x{args.size}, {args.steps} steps, "
        f"MAX_BATCH_SIZE {info['batching']['max_batch_size']}, JOBS_CONCURRENCY {args.jobs_concurrency}, "
        f"{args.probes} sequential requests per phase\n\n{table}\n\n"
        f"Bound: idle p90 + one bare batch of {args.jobs_concurrency} ({batch_s * 1000:.0f} ms) "
        f"= {bound * 1000:.0f} ms; "
        f"loaded p90 {'within' if percentile(loaded, 90) <= bound else 'ABOVE'} it.\n"
        f"Jobs: {args.jobs} submitted in {submit_s:.2f} s, all finished after {backlog_s:.1f} s; "
        f"succeeded {states['succeeded']}, failed {states['failed']}, lost {lost}, duplicated {duplicated}.\n"
        f"Command: python -m app.bench jobs --jobs {args.jobs} --probes {args.probes} --steps {args.steps} "
        f"--size {args.size} --jobs-concurrency {args.jobs_concurrency}"
    )
    print(summary)
    if args.results:
        update_section(args.results, f"jobs-{info['backend']}", "### Jobs beside interactive traffic\n\n" + summary)
    return 1 if lost or duplicated else 0
