"""Pausing a queue: workers finish what they hold and claim nothing new until it resumes."""

from __future__ import annotations

import trio

import trioqueue
from trioqueue import Queue


async def assert_conserved(backend: trioqueue.Backend) -> None:
    snap = await backend.stats()
    assert snap.conserved, snap


async def test_a_paused_queue_keeps_its_jobs_until_it_resumes(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    assert not await queue.is_paused()
    await queue.pause()
    await queue.pause()  # pausing a paused queue changes nothing
    assert await queue.is_paused()
    await queue.enqueue_many(range(5), ids=[f"j{n}" for n in range(5)])
    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await trio.sleep(30)  # a pool waiting on a paused queue: nothing runs
        assert ran == []
        assert await backend.pending() == 5
        await queue.resume()
        assert not await queue.is_paused()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert sorted(ran) == [f"j{n}" for n in range(5)]
    await assert_conserved(backend)


async def test_a_job_running_when_the_queue_pauses_finishes_and_the_next_waits(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    started = trio.Event()
    finish = trio.Event()
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "first":
            started.set()
            await finish.wait()
        ran.append(job.id)

    await queue.enqueue(1, id="first")
    async with trioqueue.open_worker_pool(backend, handler, workers=1, poll_interval=0.5) as pool:
        await started.wait()
        await queue.pause()
        # enqueued while a worker may be waiting for work: it must not take these
        await queue.enqueue(2, id="second")
        finish.set()
        await trio.sleep(10)
        assert ran == ["first"]
        record = await backend.status("second")
        assert record is not None
        assert record.state is trioqueue.JobState.RECEIVED
        await queue.resume()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert ran == ["first", "second"]
    await assert_conserved(backend)


async def test_a_pool_waiting_for_work_when_the_queue_pauses_takes_nothing(
    make_backend, autojump_clock
):
    """The pool is already waiting (on Redis, in BLMOVE) when the pause comes."""
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=5) as pool:
        await trio.sleep(1)  # every worker waits for a job now
        await queue.pause()
        await queue.enqueue_many(range(3), ids=["a", "b", "c"])
        await trio.sleep(20)
        assert ran == []
        assert await backend.pending() == 3
        # what a waiting worker took meanwhile went back, in its turn: nothing is held
        assert (await backend.stats()).gauges.inflight == 0
        if make_backend.kind != "redis-stream":  # a stream lists no unread entries
            assert await backend.job_ids("ready") == ["a", "b", "c"]
        await queue.resume()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert sorted(ran) == ["a", "b", "c"]
    await assert_conserved(backend)


async def test_a_pool_on_a_paused_queue_shuts_down_and_loses_nothing(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue_many(range(3), ids=["a", "b", "c"])
    await queue.pause()

    async def handler(job: trioqueue.Job) -> None:
        raise AssertionError("a paused queue gave out a job")

    async with trioqueue.open_worker_pool(backend, handler) as pool:
        await trio.sleep(5)
        report = await pool.shutdown(grace=1)
    assert report.clean
    assert await backend.pending() == 3
    for job_id in ("a", "b", "c"):
        record = await backend.status(job_id)
        assert record is not None
        assert (record.state, record.attempts) == (trioqueue.JobState.RECEIVED, 0)
