"""A load run through the real HTTP stack: jobs submitted faster than they run all complete, once each,
while interactive requests keep being served. Correctness only; the latency figures come from
`python -m app.bench jobs` (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import httpx

from tests.app.fakes import FakeBackend
from tests.app.jobs_server import serve_jobs

JOBS = 40
INTERACTIVE = 8


async def _run(url: str) -> tuple[list[httpx.Response], list[int]]:
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=JOBS + 4)) as client:
        submitted = await asyncio.gather(
            *(client.post("/v1/jobs", json={"prompt": f"job {i}", "seed": 1000 + i}) for i in range(JOBS))
        )
        interactive = []
        for i in range(INTERACTIVE):  # while the backlog runs
            response = await client.post("/v1/generate", json={"prompt": "now", "seed": 5000 + i})
            interactive.append(response.status_code)
        return submitted, interactive


def test_a_backlog_of_jobs_completes_exactly_once_while_interactive_requests_are_served(tmp_path):
    backend = FakeBackend(delay_s=0.02)  # 2 steps: about 40 ms per batch
    with serve_jobs(tmp_path, lambda _s: backend, jobs_concurrency=4, queue_size=8) as live:
        submitted, interactive = asyncio.run(_run(live.url))
        assert [r.status_code for r in submitted] == [202] * JOBS
        ids = [r.json()["id"] for r in submitted]
        assert len(set(ids)) == JOBS
        with httpx.Client(base_url=live.url, timeout=30) as client:
            states = [live.wait_for(client, job_id, timeout_s=120)["state"] for job_id in ids]
        time.sleep(0.5)  # room for a duplicate run, if there were one
        assert interactive == [200] * INTERACTIVE
        assert states == ["succeeded"] * JOBS  # none lost
        runs = Counter(p.seed for batch in backend.batches for p in batch if p.prompt.startswith("job "))
        assert runs == Counter({1000 + i: 1 for i in range(JOBS)})  # none duplicated
        notices = [json.loads(line) for line in (live.jobs_dir / "notifications.jsonl").read_text().splitlines()]
        assert sorted(n["job_id"] for n in notices) == sorted(ids)
        # Jobs shared batches (the worker holds several at once), within the batch limit.
        sizes = Counter(len(batch) for batch in backend.batches)
        assert max(sizes) <= live.settings.max_batch_size and any(size > 1 for size in sizes)
