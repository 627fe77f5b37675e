"""Running a job that waits for its due time now (the dashboard's "Run now")."""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import JobNotFound, JobState, Queue

pytestmark = pytest.mark.not_on_stream  # a stream source takes no due times


async def test_a_delayed_job_runs_now_when_asked(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[tuple[str, float]] = []
    start = trio.current_time()

    async def handler(job: trioqueue.Job) -> None:
        ran.append((job.id, trio.current_time() - start))

    await queue.enqueue(1, id="later", delay=3600)
    await queue.enqueue(2, id="much-later", delay=7200)
    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await trio.sleep(10)
        assert ran == []
        record = await queue.run_now("later")
        assert record.state is JobState.RECEIVED
        assert record.queued
        await trio.sleep(5)
        assert [job_id for job_id, _ in ran] == ["later"]
        assert ran[0][1] < 12
        assert await queue.job_ids("scheduled") == ["much-later"]
        await queue.cancel("much-later")
        pool.mark_producer_finished()
    snap = await backend.stats()
    assert snap.conserved, snap


@pytest.mark.server_clock
async def test_run_now_refuses_a_job_not_waiting_for_a_due_time(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="ready")
    for job_id in ("ready", "unknown"):
        with pytest.raises(JobNotFound, match="among the jobs waiting for a due time"):
            await queue.run_now(job_id)
    record = await queue.status("ready")
    assert record is not None
    assert record.state is JobState.RECEIVED


async def test_a_job_run_now_on_a_full_queue_goes_on_first_as_room_frees(
    make_backend, autojump_clock
):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue(0, id="filler")
    await queue.enqueue(1, id="due-first", delay=10)
    await queue.enqueue(2, id="hurried", delay=3600)
    await trio.sleep(20)  # due-first is due, and waits for room
    record = await queue.run_now("hurried")
    assert record.state is JobState.SCHEDULED  # no room: still stored
    claims = await backend.claim(1, lease=30, block=0)
    assert [c.job.id for c in claims] == ["filler"]
    assert await backend.ack(claims[0])
    await backend.sweep()
    claims = await backend.claim(1, lease=30, block=0)
    assert [c.job.id for c in claims] == ["hurried"]


@pytest.mark.server_clock
async def test_jobs_run_now_on_a_full_queue_go_on_the_last_first(make_backend, autojump_clock):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue(0, id="filler")
    for job_id in ("a", "b", "c"):
        await queue.enqueue(job_id, id=job_id, delay=3600)
    for job_id in ("a", "b"):
        record = await queue.run_now(job_id)
        assert record.state is JobState.SCHEDULED  # no room yet
    order = []
    for _ in range(3):
        [claim] = await backend.claim(1, lease=30, block=0)
        order.append(claim.job.id)
        assert await backend.ack(claim)
        await backend.sweep()
    assert order == ["filler", "b", "a"]
    assert await queue.job_ids("scheduled") == ["c"]
