"""The batching queue with a stand-in backend: grouping, bounds, deadlines and failures."""

from __future__ import annotations

import asyncio

import pytest

from app.batching import Batcher, DeadlineExceeded, QueueFull
from tests.app.fakes import FakeBackend, params


async def _with_batcher(backend: FakeBackend, body, **kwargs):
    options = {"max_batch_size": 4, "batch_wait_s": 0.2, "queue_size": 8, **kwargs}
    batcher = Batcher(backend, **options)
    batcher.start()
    try:
        return await body(batcher)
    finally:
        await batcher.stop()


def test_compatible_requests_share_a_batch_up_to_the_limit():
    backend = FakeBackend()

    async def body(batcher: Batcher):
        results = await asyncio.gather(*(batcher.submit(params(seed=i), timeout_s=10) for i in range(6)))
        return [r.batch_size for r in results]

    sizes = asyncio.run(_with_batcher(backend, body))
    assert [len(b) for b in backend.batches] == [4, 2]
    assert sizes == [4, 4, 4, 4, 2, 2]
    assert [p.seed for b in backend.batches for p in b] == list(range(6))  # first come, first served


def test_incompatible_requests_run_in_separate_batches():
    backend = FakeBackend()

    async def body(batcher: Batcher):
        await asyncio.gather(
            batcher.submit(params(width=64), 10),
            batcher.submit(params(width=128), 10),
            batcher.submit(params(width=64, steps=3), 10),
            batcher.submit(params(width=64), 10),
        )

    asyncio.run(_with_batcher(backend, body))
    keys = sorted(tuple(p.batch_key for p in b) for b in backend.batches)
    assert len(backend.batches) == 3
    assert ((64, 64, 2, 7.5, (), None), (64, 64, 2, 7.5, (), None)) in keys


def test_batch_limit_is_capped_by_the_backend():
    backend = FakeBackend(max_batch_size=2)
    batcher = Batcher(backend, max_batch_size=16, batch_wait_s=0.1, queue_size=8)
    assert batcher.max_batch_size == 2


def test_full_queue_raises_queue_full_and_never_exceeds_its_bound():
    backend = FakeBackend()
    backend.release.clear()  # hold the pipeline so requests pile up

    async def body(batcher: Batcher):
        running = asyncio.create_task(batcher.submit(params(seed=0), 10))
        await asyncio.sleep(0.4)  # the worker has taken it into a (held) pipeline call
        waiting = [asyncio.create_task(batcher.submit(params(seed=i), 10)) for i in range(1, 5)]
        await asyncio.sleep(0.05)
        depth = batcher.depth
        with pytest.raises(QueueFull):
            await batcher.submit(params(seed=99), 10)
        backend.release.set()
        results = await asyncio.gather(running, *waiting)
        return depth, len(results), batcher.stats.max_queue_depth

    assert asyncio.run(_with_batcher(backend, body, queue_size=4)) == (4, 5, 4)


def test_request_past_its_deadline_gets_deadline_exceeded_and_is_not_run():
    backend = FakeBackend()
    backend.release.clear()

    async def body(batcher: Batcher):
        running = asyncio.create_task(batcher.submit(params(seed=1), 10))
        await asyncio.sleep(0.3)  # seed 1 is inside the (held) pipeline call
        with pytest.raises(DeadlineExceeded):
            await batcher.submit(params(seed=2, width=128), timeout_s=0.2)
        backend.release.set()
        await running
        await batcher.submit(params(seed=3), 10)

    asyncio.run(_with_batcher(backend, body))
    ran = [p.seed for b in backend.batches for p in b]
    assert ran == [1, 3]  # the departed request never reached the pipeline


def test_a_failing_batch_fails_its_requests_and_the_worker_keeps_going():
    backend = FakeBackend()

    async def body(batcher: Batcher):
        with pytest.raises(RuntimeError, match="simulated"):
            await batcher.submit(params(prompt="explode"), 10)
        return await batcher.submit(params(seed=9), 10)

    result = asyncio.run(_with_batcher(backend, body))
    assert result.image.getpixel((0, 0)) == (9, 0, 0)


def test_step_listener_sees_every_step_on_the_event_loop():
    backend = FakeBackend()
    seen: list[tuple[int, int]] = []

    async def body(batcher: Batcher):
        await batcher.submit(params(steps=3), 10, on_step=lambda done, total: seen.append((done, total)))
        await asyncio.sleep(0.05)  # steps are delivered with call_soon_threadsafe

    asyncio.run(_with_batcher(backend, body))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_wait_idle_returns_after_queued_work_finishes():
    backend = FakeBackend(delay_s=0.05)

    async def body(batcher: Batcher):
        tasks = [asyncio.create_task(batcher.submit(params(seed=i), 10)) for i in range(3)]
        await asyncio.sleep(0)
        await asyncio.wait_for(batcher.wait_idle(), 10)
        ran = sorted(p.seed for b in backend.batches for p in b)
        await asyncio.gather(*tasks)
        return ran

    assert asyncio.run(_with_batcher(backend, body)) == [0, 1, 2]


def test_a_group_enters_together_and_runs_as_one_batch_behind_a_held_call():
    backend = FakeBackend()
    backend.release.clear()

    async def body(batcher: Batcher):
        running = asyncio.create_task(batcher.submit(params(seed=0), 10))
        await asyncio.sleep(0.3)  # seed 0 is inside the (held) pipeline call
        group = asyncio.create_task(batcher.submit_many([params(seed=s) for s in (1, 2, 3)], 10))
        await asyncio.sleep(0.05)
        depth = batcher.depth
        backend.release.set()
        await running
        return depth, [(r.batch_size, r.image.getpixel((0, 0))[0]) for r in await group]

    depth, results = asyncio.run(_with_batcher(backend, body))
    assert depth == 3
    assert results == [(3, 1), (3, 2), (3, 3)]  # in order, from one pipeline call of three
    assert [[p.seed for p in b] for b in backend.batches] == [[0], [1, 2, 3]]


def test_a_group_the_queue_cannot_hold_whole_is_refused_whole():
    backend = FakeBackend()
    backend.release.clear()

    async def body(batcher: Batcher):
        running = asyncio.create_task(batcher.submit(params(seed=0), 10))
        await asyncio.sleep(0.3)
        waiting = asyncio.create_task(batcher.submit(params(seed=1), 10))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull):
            await batcher.submit_many([params(seed=s) for s in (2, 3, 4)], 10)  # 1 queued + 3 > 3
        depth = batcher.depth
        backend.release.set()
        await asyncio.gather(running, waiting)
        return depth

    assert asyncio.run(_with_batcher(backend, body, queue_size=3)) == 1  # nothing of the group was queued
    assert [p.seed for b in backend.batches for p in b] == [0, 1]


def test_a_group_fails_with_its_first_failure_and_withdraws_the_rest():
    # One image per call, so the failing one runs before its sibling; slow steps (0.2 s), so the sibling's call
    # is still at its first step when the group gives up on it.
    backend = FakeBackend(max_batch_size=1, delay_s=0.2)

    async def body(batcher: Batcher):
        with pytest.raises(RuntimeError, match="simulated"):
            await batcher.submit_many([params(prompt="explode"), params(seed=5)], 10)
        await batcher.wait_idle()
        after = await batcher.submit(params(seed=9), 10)  # the worker keeps going
        return batcher.stats, after.image.getpixel((0, 0))

    stats, pixel = asyncio.run(_with_batcher(backend, body, max_batch_size=1))
    # Nobody waits for the sibling: dropped before its call, or its call stopped after the first step.
    assert stats.dropped + stats.abandoned_batches == 1
    assert pixel == (9, 0, 0)
