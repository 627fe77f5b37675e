"""Cancelling: a waiting job is removed at once, a held one is stopped by its pool."""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import CancelResult, JobCancelled, JobNotFound, JobState, Queue, RetryPolicy


async def assert_cancelled(queue: Queue, job_id: str) -> trioqueue.JobRecord:
    record = await queue.status(job_id)
    assert record is not None
    assert record.state is JobState.CANCELLED
    with pytest.raises(JobCancelled, match=f"job '{job_id}' was cancelled"):
        await queue.result(job_id)
    stats = await queue.stats()
    assert stats.conserved, stats
    return record


@pytest.mark.server_clock
async def test_a_waiting_job_never_runs(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    await queue.enqueue("b", id="b")
    # a stream keeps an entry its group has not read (other groups read it): it ends
    # when read, and counts as waiting until then
    stream = make_backend.kind == "redis-stream"
    expected = CancelResult.REQUESTED if stream else CancelResult.CANCELLED
    assert await queue.cancel("a") is expected
    assert await queue.cancel("a") is (expected if stream else CancelResult.FINISHED)
    assert (await queue.stats()).conserved
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert ran == ["b"]
    await assert_cancelled(queue, "a")
    assert await backend.pending() == 0


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_a_ready_job_is_removed_and_its_room_freed(make_backend, autojump_clock):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    await queue.enqueue("b", id="b")
    with pytest.raises(trioqueue.QueueFull):
        await queue.try_enqueue("c", id="c")
    assert await queue.cancel("a") is CancelResult.CANCELLED
    await queue.try_enqueue("c", id="c")  # its place is free
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert sorted(ran) == ["b", "c"]
    record = await assert_cancelled(queue, "a")
    assert (record.attempts, record.reason) == (0, "cancelled while it waited for a worker")
    stats = await queue.stats()
    assert (stats.cancelled, stats.succeeded, stats.gauges.held) == (1, 2, 0)


@pytest.mark.not_on_stream
async def test_scheduled_and_stored_jobs_are_removed_too(make_backend, autojump_clock):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue("later", id="later", delay=5)
    await queue.enqueue("ready", id="ready")
    stored = await queue.submit("stored", id="stored")  # the queue is full: kept aside
    assert not stored.queued
    assert await queue.cancel("later") is CancelResult.CANCELLED
    assert await queue.cancel("stored") is CancelResult.CANCELLED
    gauges = (await queue.stats()).gauges
    assert (gauges.scheduled, gauges.backlog) == (0, 1)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    async with trioqueue.open_worker_pool(backend, handler):
        await trio.sleep(10)  # past the due time it had
    assert ran == ["ready"]
    for job_id in ("later", "stored"):
        await assert_cancelled(queue, job_id)


async def test_a_running_handler_is_cancelled_and_the_job_not_retried(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[tuple[str, float]] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(("started", trio.current_time()))
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            seen.append(("cancelled", trio.current_time()))
            raise
        finally:
            seen.append(("finally", trio.current_time()))

    await queue.enqueue("long", id="long")
    await queue.enqueue("next", id="next")
    async with trioqueue.open_worker_pool(backend, handler, workers=1) as pool:
        await trio.sleep(5)
        asked = trio.current_time()
        assert await queue.cancel("long") is CancelResult.REQUESTED
        with trio.fail_after(5):
            record_error = None
            try:
                await queue.result("long")
            except JobCancelled as exc:
                record_error = exc
        assert record_error is not None
        # heard within the sweep interval (1 s): the handler saw Cancelled, its finally ran
        assert [name for name, _ in seen[:3]] == ["started", "cancelled", "finally"]
        assert seen[1][1] - asked <= 1.5
        # the worker goes on with the next job
        await trio.sleep(1)
        assert [name for name, _ in seen[3:4]] == ["started"]
        assert await queue.cancel("next") is CancelResult.REQUESTED
        await pool.shutdown(grace=10)
    record = await assert_cancelled(queue, "long")
    assert (record.attempts, record.last_error) == (0, None)  # cancelled, not failed
    await assert_cancelled(queue, "next")
    stats = await queue.stats()
    assert (stats.cancelled, stats.failed, stats.retries) == (2, 0, 0)


async def test_a_job_sleeping_before_its_retry_ends_without_another_attempt(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    attempts: list[int] = []

    async def failing(job: trioqueue.Job) -> None:
        attempts.append(job.attempt)
        raise trioqueue.Retry(delay=60)

    await queue.enqueue("x", id="x")
    async with trioqueue.open_worker_pool(backend, failing) as pool:
        await trio.sleep(5)  # the first attempt failed: it sleeps 60 s
        assert await queue.cancel("x") is CancelResult.REQUESTED
        with trio.fail_after(5):
            with pytest.raises(JobCancelled):
                await queue.result("x")
        await pool.shutdown(grace=1)
    assert attempts == [1]
    record = await assert_cancelled(queue, "x")
    assert record.attempts == 1


@pytest.mark.server_clock
async def test_a_cancel_the_pool_never_heard_ends_the_job_when_it_is_given_back(
    make_backend, autojump_clock
):
    """Cancelled, then the pool stops before its next renewal: the job ends all the same."""
    backend = await make_backend()
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(3600)

    await queue.enqueue("held", id="held")
    async with trioqueue.open_worker_pool(backend, handler) as pool:
        await trio.sleep(0.2)
        assert await queue.cancel("held") is CancelResult.REQUESTED
        await pool.shutdown(grace=0)  # before any renewal
    await assert_cancelled(queue, "held")


@pytest.mark.server_clock
async def test_a_finished_job_is_left_alone_and_an_unknown_one_not_found(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> str:
        if job.payload == "bad":
            raise RuntimeError("bad")
        return "done"

    await queue.enqueue("ok", id="ok")
    await queue.enqueue("bad", id="bad")
    async with trioqueue.open_worker_pool(backend, handler, retry=RetryPolicy(max_attempts=1)):
        pass
    assert await queue.cancel("ok") is CancelResult.FINISHED
    assert await queue.cancel("bad") is CancelResult.FINISHED  # a dead letter is finished
    assert await queue.result("ok") == "done"
    assert (await queue.status("bad")).state is JobState.FAILED  # type: ignore[union-attr]
    assert await queue.cancel("ok") is CancelResult.FINISHED  # again: the same
    with pytest.raises(JobNotFound):
        await queue.cancel("nobody")
    assert (await queue.stats()).cancelled == 0


async def test_a_waiter_hears_of_the_cancel_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="w")  # nobody runs it
    heard: list[float] = []

    async def wait() -> None:
        with pytest.raises(JobCancelled):
            await queue.result("w")
        heard.append(trio.current_time())

    async def handler(job: trioqueue.Job) -> None:
        raise AssertionError("a cancelled job ran")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(2)
        cancelled_at = trio.current_time()
        if make_backend.kind == "redis-stream":  # it ends when its group reads it
            assert await queue.cancel("w") is CancelResult.REQUESTED
            async with trioqueue.open_worker_pool(backend, handler):
                pass
        else:
            assert await queue.cancel("w") is CancelResult.CANCELLED
    assert heard[0] - cancelled_at < 1
