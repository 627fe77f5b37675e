"""Priorities: a claim takes the highest level first, first in first out within one.

A stream source has no levels (its group reads entries in stream order, and
refuses a priority: ``test_redis_streams.py``), so these tests skip it.
"""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import PRIORITIES, Queue, RetryPolicy

pytestmark = pytest.mark.not_on_stream


async def claimed_ids(backend: trioqueue.Backend, n: int = 100) -> list[str]:
    """Claim up to *n* jobs in as many calls as it takes; ack each; their ids in order."""
    ids: list[str] = []
    while len(ids) < n:
        claims = await backend.claim(n - len(ids), lease=30, block=0)
        if not claims:
            break
        for claim in claims:
            ids.append(claim.job.id)
            assert await backend.ack(claim)
    return ids


@pytest.mark.server_clock
async def test_a_claim_takes_the_highest_level_first_and_fifo_within_one(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    order = [("a", 0), ("b", -2), ("c", 2), ("d", 0), ("e", 1), ("f", 2), ("g", -1), ("h", 0)]
    for job_id, priority in order:
        await queue.enqueue(job_id, id=job_id, priority=priority)
    assert await claimed_ids(backend) == ["c", "f", "e", "a", "d", "h", "g", "b"]


@pytest.mark.server_clock
async def test_a_claim_of_a_few_takes_them_from_the_top(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("low", id="low", priority=-1)
    await queue.enqueue("plain", id="plain")
    await queue.enqueue("urgent", id="urgent", priority=2)
    first = await backend.claim(1, lease=30, block=0)
    assert [c.job.id for c in first] == ["urgent"]
    assert first[0].job.priority == 2
    await queue.enqueue("high", id="high", priority=1)  # arrives later, still goes first
    assert await claimed_ids(backend) == ["high", "plain", "low"]


@pytest.mark.server_clock
async def test_a_job_and_its_record_carry_their_priority(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("x", id="x", priority=-2)
    await queue.enqueue("y", id="y")
    record = await queue.status("x")
    assert record is not None
    assert record.priority == -2
    claims = await backend.claim(2, lease=30, block=0)
    assert {c.job.id: c.job.priority for c in claims} == {"y": 0, "x": -2}


@pytest.mark.server_clock
async def test_capacity_counts_every_level_and_stats_count_each(make_backend, autojump_clock):
    backend = await make_backend(capacity=4)
    queue = Queue(backend)
    for job_id, priority in [("a", 2), ("b", 0), ("c", 0), ("d", -2)]:
        await queue.try_enqueue(job_id, id=job_id, priority=priority)
    with pytest.raises(trioqueue.QueueFull):
        await queue.try_enqueue("e", id="e", priority=2)
    gauges = (await queue.stats()).gauges
    assert gauges.queue_depth == 4
    assert gauges.ready_by_priority == {2: 1, 1: 0, 0: 2, -1: 0, -2: 1}
    assert list(gauges.ready_by_priority) == list(PRIORITIES)  # highest first
    await claimed_ids(backend, 1)
    gauges = (await queue.stats()).gauges
    assert gauges.ready_by_priority == {2: 0, 1: 0, 0: 2, -1: 0, -2: 1}


@pytest.mark.server_clock
async def test_a_job_stored_for_want_of_room_takes_its_level_when_room_frees(
    make_backend, autojump_clock
):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    await queue.enqueue("b", id="b")
    stored = await queue.submit("urgent", id="urgent", priority=2)
    assert not stored.queued
    assert await claimed_ids(backend, 1) == ["a"]  # its room goes to the stored job
    assert await claimed_ids(backend) == ["urgent", "b"]


async def test_a_delayed_job_takes_its_level_when_due(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("later", id="later", delay=5, priority=1)
    await queue.enqueue("now", id="now")
    await trio.sleep(6)
    assert await claimed_ids(backend) == ["later", "now"]


@pytest.mark.server_clock
async def test_a_job_given_back_or_retried_keeps_its_level(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("plain", id="plain")
    await queue.enqueue("high", id="high", priority=1)
    (claim,) = await backend.claim(1, lease=30, block=0)
    assert claim.job.id == "high"
    assert await backend.release([claim]) == 1
    await queue.enqueue("later plain", id="later plain")
    assert await claimed_ids(backend) == ["high", "plain", "later plain"]

    attempts: list[tuple[str, int, int]] = []

    async def flaky(job: trioqueue.Job) -> None:
        attempts.append((job.id, job.attempt, job.priority))
        if job.id == "urgent" and job.attempt == 1:
            raise RuntimeError("once")

    await queue.enqueue("urgent", id="urgent", priority=2)
    policy = RetryPolicy(max_attempts=2, base_delay=0.1, max_delay=0.1)
    async with trioqueue.open_worker_pool(backend, flaky, workers=1, retry=policy):
        pass
    assert attempts == [("urgent", 1, 2), ("urgent", 2, 2)]


@pytest.mark.server_clock
async def test_a_requeued_dead_letter_keeps_its_level(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("urgent", id="urgent", priority=2)
    (claim,) = await backend.claim(1, lease=30, block=0)
    assert await backend.dead_letter(claim, None, "given up")
    await queue.enqueue("plain", id="plain")
    await backend.requeue_dead("urgent")
    assert await claimed_ids(backend) == ["urgent", "plain"]


@pytest.mark.server_clock
async def test_cancelling_a_job_at_any_level_removes_it(make_backend, autojump_clock):
    backend = await make_backend(capacity=3)
    queue = Queue(backend)
    for job_id, priority in [("high", 2), ("plain", 0), ("low", -2)]:
        await queue.enqueue(job_id, id=job_id, priority=priority)
    assert await queue.cancel("high") is trioqueue.CancelResult.CANCELLED
    assert await queue.cancel("low") is trioqueue.CancelResult.CANCELLED
    gauges = (await queue.stats()).gauges
    assert gauges.ready_by_priority == {2: 0, 1: 0, 0: 1, -1: 0, -2: 0}
    await queue.try_enqueue("more", id="more", priority=-1)  # their room is free
    assert await claimed_ids(backend) == ["plain", "more"]


async def test_strict_priority_starves_a_lower_level_while_higher_work_arrives(
    make_backend, autojump_clock
):
    """Strict, not aging: the plain job waits as long as urgent ones keep coming."""
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)
        await trio.sleep(1)
        if job.id.startswith("urgent") and len(ran) < 6:
            await queue.enqueue("next", id=f"urgent-{len(ran)}", priority=2)

    await queue.enqueue("plain", id="plain")
    await queue.enqueue("first", id="urgent-0", priority=2)
    async with trioqueue.open_worker_pool(backend, handler, workers=1, prefetch=0):
        pass
    assert ran == [f"urgent-{n}" for n in range(6)] + ["plain"]


async def test_blocked_claims_wake_for_jobs_at_any_level(make_backend, autojump_clock):
    """Claims waiting on an empty queue take jobs put at a level other than 0.

    On Redis they wait on priority 0's list alone: the first job put elsewhere
    wakes one, and a claim that leaves jobs behind wakes the next.
    """
    backend = await make_backend()
    queue = Queue(backend)
    got: list[str] = []
    all_three = trio.Event()

    async def claimer() -> None:
        claims = await backend.claim(1, lease=30, block=60)
        got.extend(c.job.id for c in claims)
        if len(got) == 3:
            all_three.set()
        for claim in claims:
            await backend.ack(claim)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(claimer)
        await trio.sleep(1)
        await queue.enqueue_many(["a", "b"], ids=["a", "b"], priority=1)
        await queue.enqueue("c", id="c", priority=-2)
        with trio.fail_after(30):  # mock time: far below the claims' own 60 s
            await all_three.wait()
    assert sorted(got) == ["a", "b", "c"]
