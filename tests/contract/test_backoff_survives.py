"""A retry's backoff is kept by the backend: it survives a shutdown and a crash.

The pool's retry sleepers wait out a backoff, but the backend records the next
attempt's due time when the attempt ends (`Backend.retry_later`). A job given
back mid-backoff (`release`, at shutdown) or recovered from a crashed owner
(`sweep`) waits the rest of its backoff among the delayed jobs; it never runs
early. The record shows the due time (`JobRecord.due_at`) while it waits.
"""

from __future__ import annotations

import random

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, Retry, RetryPolicy


async def record_of(backend: trioqueue.Backend, job_id: str) -> trioqueue.JobRecord:
    record = await backend.status(job_id)
    assert record is not None
    return record


@pytest.mark.server_clock
async def test_a_retry_records_its_due_time_and_a_requeue_clears_it(make_backend, autojump_clock):
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    [claim] = await backend.claim(1, lease=30, block=0)
    assert await backend.retry_later(claim, None, delay=10)
    record = await record_of(backend, "j")
    assert record.state is JobState.FAILED_RETRY
    assert record.due_at == pytest.approx(record.updated_at + 10, abs=0.05)
    snap = await backend.stats()
    assert (snap.gauges.retry_waiting, snap.gauges.scheduled) == (1, 0)  # held by its claim
    assert await backend.requeue(claim)
    assert (await record_of(backend, "j")).due_at is None
    [again] = await backend.claim(1, lease=30, block=0)
    assert again.job.attempt == 2
    assert await backend.ack(again)
    record = await record_of(backend, "j")
    assert (record.state, record.due_at) == (JobState.COMPLETED, None)
    assert (await backend.stats()).conserved


@pytest.mark.parametrize("given_back_after", [3.0, 12.0])
async def test_a_job_given_back_mid_backoff_waits_the_rest_of_it(
    make_backend, autojump_clock, given_back_after
):
    """Released 3 s into a 10 s backoff: stored until its due time; released after it:
    ready at once, next in line."""
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    [claim] = await backend.claim(1, lease=30, block=0)
    failed_at = trio.current_time()
    assert await backend.retry_later(claim, None, delay=10)
    await trio.sleep(given_back_after)
    assert await backend.release([claim]) == 1
    snap = await backend.stats()
    assert snap.conserved
    assert snap.gauges.retry_waiting == 0
    if given_back_after < 10:
        assert (snap.gauges.scheduled, snap.gauges.queue_depth) == (1, 0)
        record = await record_of(backend, "j")
        assert (record.state, record.queued) == (JobState.FAILED_RETRY, False)
        assert await backend.claim(1, lease=30, block=0) == []
        await trio.sleep_until(failed_at + 9.9)
        assert await backend.claim(1, lease=30, block=0) == []
        await trio.sleep_until(failed_at + 10.1)
    else:
        assert (snap.gauges.scheduled, snap.gauges.queue_depth) == (0, 1)
    [again] = await backend.claim(1, lease=30, block=0)
    assert (again.job.id, again.job.attempt) == ("j", 2)
    assert (await record_of(backend, "j")).due_at is None
    assert await backend.ack(again)
    assert (await backend.stats()).conserved


async def test_a_crashed_owners_job_mid_backoff_waits_the_rest_of_it(make_backend, autojump_clock):
    """The owner failed the attempt with a 20 s backoff and died: its lease runs out
    after 5 s and the sweep recovers the job, which still waits until its due time."""
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    [claim] = await backend.claim(1, lease=5, block=0)
    failed_at = trio.current_time()
    assert await backend.retry_later(claim, None, delay=20)
    recovered = 0
    for _ in range(8):  # the queue is live (sweeps go on); the owner never renews
        await trio.sleep(1)
        recovered += (await backend.sweep()).recovered
    assert recovered == 1
    snap = await backend.stats()
    g = snap.gauges
    assert (g.scheduled, g.inflight, g.retry_waiting, g.queue_depth) == (1, 0, 0, 0)
    assert snap.conserved
    record = await record_of(backend, "j")
    assert record.state is JobState.FAILED_RETRY
    assert record.due_at is not None
    assert await backend.claim(1, lease=5, block=0) == []
    await trio.sleep_until(failed_at + 19.9)
    assert await backend.claim(1, lease=5, block=0) == []
    await trio.sleep_until(failed_at + 20.1)
    [again] = await backend.claim(1, lease=5, block=0)
    assert (again.job.id, again.job.attempt) == ("j", 2)
    assert await backend.ack(again)
    assert (await backend.stats()).conserved


@pytest.mark.parametrize("asked_by", ["policy", "Retry(delay=)"])
async def test_a_pool_shut_down_mid_backoff_does_not_run_the_job_early(
    make_backend, autojump_clock, asked_by
):
    """The next attempt, in a pool started at once after the shutdown, comes no earlier
    than the backoff asked: the job was given back with what remained of it."""
    backend = await make_backend()
    queue = Queue(backend)
    starts: list[float] = []
    failed = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        starts.append(trio.current_time())
        failed.set()
        if job.attempt == 1:
            if asked_by == "policy":
                raise RuntimeError("the mail server is down")
            raise Retry(delay=30)

    # the policy's backoff: the seeded pool's first draw of full jitter over [0, 30] s
    policy = RetryPolicy(max_attempts=3, base_delay=30, max_delay=30)
    seed = 0
    asked = policy.backoff(1, random.Random(seed)) if asked_by == "policy" else 30
    assert asked > 10  # well past the shutdown, 5 s in
    await queue.enqueue("p", id="j")
    async with trioqueue.open_worker_pool(backend, handler, retry=policy, seed=seed) as pool:
        await failed.wait()
        await trio.sleep(5)
        report = await pool.shutdown(grace=0)
    assert report.released == 1
    record = await record_of(backend, "j")
    assert (record.state, record.attempts) == (JobState.FAILED_RETRY, 1)
    assert record.due_at is not None
    g = (await backend.stats()).gauges
    assert (g.scheduled, g.inflight, g.retry_waiting) == (1, 0, 0)
    async with trioqueue.open_worker_pool(backend, handler, retry=policy):
        pass  # drains: it waits for the job's due time, then runs it
    assert len(starts) == 2
    assert asked <= starts[1] - starts[0] < asked + 0.5
    record = await record_of(backend, "j")
    assert (record.state, record.attempts) == (JobState.COMPLETED, 2)
    assert (await backend.stats()).conserved
