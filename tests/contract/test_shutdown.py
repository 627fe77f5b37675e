"""Stopping: drain after the producer finishes, or a grace period then cancel; lose nothing."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import JobState, Queue, RetryPolicy

from ..conftest import collect, settle


def interrupted_to_dead(make_backend, running: int) -> int:
    """How many of *running* interrupted handlers' jobs become dead letters, not put back.

    Where the queue redelivers (at-least-once) every interrupted job goes back; an
    at-most-once queue never reruns a handler that started, and dead-letters its job.
    """
    return 0 if make_backend.redelivers else running


@pytest.mark.server_clock
async def test_leaving_the_block_drains_every_job(make_backend, autojump_clock):
    backend = await make_backend(capacity=4)
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen), workers=2):
        for i in range(25):
            await Queue(backend).enqueue(i)
    assert sorted(job.payload for job in seen) == list(range(25))
    assert await backend.pending() == 0


async def test_the_pool_waits_for_a_slow_producer_to_finish(make_backend, autojump_clock, nursery):
    """The seed's early-shutdown loss: an empty queue must not stop the pool."""
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[trioqueue.Job] = []
    finished_at: list[float] = []

    async with trioqueue.open_worker_pool(backend, collect(seen), workers=4) as pool:

        async def slow_producer() -> None:
            for i in range(10):
                await queue.enqueue(i)
                await trio.sleep(1)  # the fast workers empty the queue meanwhile
            finished_at.append(trio.current_time())
            pool.mark_producer_finished()

        start = trio.current_time()
        nursery.start_soon(slow_producer)
        await pool.wait_stopped()
        stopped_at = trio.current_time()
    assert finished_at == [start + 10]
    assert stopped_at == finished_at[0]
    assert sorted(job.payload for job in seen) == list(range(10))


async def test_shutdown_of_an_idle_pool_returns_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    async with trioqueue.open_worker_pool(backend, collect([])) as pool:
        start = trio.current_time()
        report = await pool.shutdown(grace=30)
        assert trio.current_time() == start
    assert report == trioqueue.ShutdownReport(finished=0, cancelled=0, released=0)
    assert report.clean


async def test_shutdown_lets_running_handlers_finish_within_grace(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    done: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(2)
        done.append(job.id)

    async with trioqueue.open_worker_pool(backend, handler, workers=2) as pool:
        await queue.enqueue("a", id="a")
        await queue.enqueue("b", id="b")
        await queue.enqueue("c", id="c")
        await trio.sleep(1)
        report = await pool.shutdown(grace=5)
        assert trio.current_time() == 2  # returned as soon as the handlers finished
    assert sorted(done) == ["a", "b"]
    assert (report.finished, report.cancelled, report.clean) == (2, 0, True)
    record = await backend.status("c")
    assert record is not None
    assert (record.state, record.queued) == (JobState.RECEIVED, True)  # never started


async def test_shutdown_cancels_after_grace_and_a_new_pool_finishes_the_jobs(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)

    async def stuck(job: trioqueue.Job) -> None:
        await trio.sleep(1000)

    async with trioqueue.open_worker_pool(backend, stuck, workers=2) as pool:
        for i in range(5):
            await queue.enqueue(i, id=str(i))
        await trio.sleep(1)
        report = await pool.shutdown(grace=5)
        assert trio.current_time() == 6  # the deadline, not a moment later
    assert (report.finished, report.cancelled, report.clean) == (0, 2, False)
    dead = interrupted_to_dead(make_backend, 2)
    assert report.released >= 2 - dead  # the cancelled ones, plus any claimed but not started
    snap = await backend.stats()
    assert (snap.failed, snap.succeeded, snap.dead_lettered) == (0, 0, dead)  # cancelled ≠ failed
    assert snap.released == report.released
    assert await backend.pending() == 5 - dead
    waiting = [
        str(i) for i in range(5) if str(i) not in {r.id for r in await backend.dead_letters()}
    ]
    for job_id in waiting:
        record = await backend.status(job_id)
        assert record is not None
        assert (record.state, record.attempts) == (JobState.RECEIVED, 0)

    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen)):
        pass
    assert sorted(job.id for job in seen) == waiting
    assert all(job.attempt == 1 for job in seen)
    assert (await backend.stats()).conserved


async def test_shutdown_puts_jobs_waiting_to_retry_back_at_once_with_their_backoff(
    make_backend, autojump_clock
):
    """Nothing waits for a sleeping retry at shutdown; the jobs are given back stored
    until their due times, and run then (tests/contract/test_backoff_survives.py)."""
    backend = await make_backend()
    queue = Queue(backend)
    healthy = False

    async def handler(job: trioqueue.Job) -> None:
        if not healthy:
            raise RuntimeError("down")

    retry = RetryPolicy(max_attempts=5, base_delay=100, max_delay=100)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry, seed=1) as pool:
        for i in range(3):
            await queue.enqueue(i, id=str(i))
        # each fails once and sleeps (100 s at most): on a busy machine Redis replies may
        # take longer than settle()'s cushion, so look until all three are sleeping
        with trio.fail_after(10):  # on Trio's clock: below the shortest sleep (13 s, seed 1)
            while (await backend.stats()).gauges.retry_waiting < 3:
                await settle()
        start = trio.current_time()
        report = await pool.shutdown(grace=10)
        assert trio.current_time() == start  # nothing was running: no need to wait
    assert report == trioqueue.ShutdownReport(finished=0, cancelled=0, released=3)
    due: list[float] = []
    for i in range(3):
        record = await backend.status(str(i))
        assert record is not None
        assert (record.state, record.attempts, record.queued) == (JobState.FAILED_RETRY, 1, False)
        assert record.due_at is not None
        due.append(record.due_at - record.updated_at)  # what remains of its backoff
    assert (await backend.stats()).gauges.scheduled == 3
    healthy = True
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        pass  # drains: the last one runs at its due time
    assert max(due) <= trio.current_time() - start < max(due) + 1
    snap = await backend.stats()
    assert (snap.succeeded, snap.failed, snap.gauges.held) == (3, 3, 0)


async def test_a_failure_during_the_grace_period_is_put_back_not_slept_on(
    make_backend, autojump_clock
):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(2)
        raise RuntimeError("fails while the pool drains")

    retry = RetryPolicy(base_delay=100, max_delay=100)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry, seed=0) as pool:
        await Queue(backend).enqueue("p", id="j")
        await trio.sleep(1)
        report = await pool.shutdown(grace=5)
        assert trio.current_time() == 2
    assert report == trioqueue.ShutdownReport(finished=1, cancelled=0, released=1)
    record = await backend.status("j")
    assert record is not None
    # stored until its backoff (seeded: 84 s) ends, not slept on by the stopping pool
    assert (record.state, record.attempts, record.queued) == (JobState.FAILED_RETRY, 1, False)
    assert record.due_at is not None
    assert record.due_at - record.updated_at == pytest.approx(84.4, abs=0.1)


async def test_a_second_shutdown_with_less_grace_cuts_the_grace_short(
    make_backend, autojump_clock, nursery
):
    backend = await make_backend()

    async def stuck(job: trioqueue.Job) -> None:
        await trio.sleep(1000)

    reports: list[trioqueue.ShutdownReport] = []

    async def first_stop(pool: trioqueue.WorkerPool) -> None:
        reports.append(await pool.shutdown(grace=60))

    async with trioqueue.open_worker_pool(backend, stuck, workers=2) as pool:
        for i in range(3):
            await Queue(backend).enqueue(i, id=str(i))
        await trio.sleep(1)
        nursery.start_soon(first_stop, pool)  # a first Ctrl-C: a minute of grace
        await trio.sleep(2)
        report = await pool.shutdown(grace=0)  # the second: stop now
        assert trio.current_time() == 3  # not 61
    await trio.testing.wait_all_tasks_blocked()
    assert reports == [report]
    assert (report.cancelled, report.clean) == (2, False)
    assert await backend.pending() == 3 - interrupted_to_dead(make_backend, 2)  # put back
    assert (await backend.stats()).conserved


@pytest.mark.server_clock
async def test_shutdown_twice_returns_the_first_report(make_backend, autojump_clock):
    async with trioqueue.open_worker_pool(await make_backend(), collect([])) as pool:
        first = await pool.shutdown(grace=1)
        assert await pool.shutdown(grace=1) is first


async def test_a_shutdown_whose_caller_is_cancelled_still_finishes(make_backend, autojump_clock):
    backend = await make_backend()
    started = trio.Event()

    async def slow(job: trioqueue.Job) -> None:
        started.set()
        await trio.sleep(100)

    async with trioqueue.open_worker_pool(backend, slow, workers=1) as pool:
        await Queue(backend).enqueue("p", id="j")
        await started.wait()
        with trio.move_on_after(1):
            await pool.shutdown(grace=10)  # its caller gives up during the grace
        with trio.fail_after(60):  # a later call gets the report: the shutdown went on
            report = await pool.shutdown(grace=10)
        # the first call's grace, not restarted (that would end at 11 or later); on Redis
        # the mock clock may jump a little further while a reply is slow to come
        assert 10 <= trio.current_time() < 11
    assert (report.finished, report.cancelled) == (0, 1)
    assert await backend.pending() == 1 - interrupted_to_dead(make_backend, 1)


async def test_an_error_in_the_body_propagates_unwrapped_and_loses_nothing(
    make_backend, autojump_clock
):
    backend = await make_backend()

    async def stuck(job: trioqueue.Job) -> None:
        await trio.sleep(1000)

    async def use_pool() -> None:
        async with trioqueue.open_worker_pool(backend, stuck, workers=2):
            for i in range(4):
                await Queue(backend).enqueue(i)
            await trio.sleep(1)
            raise KeyError("from the body")

    with pytest.raises(KeyError, match="from the body"):
        await use_pool()
    dead = interrupted_to_dead(make_backend, 2)
    assert await backend.pending() == 4 - dead
    snap = await backend.stats()
    assert (snap.gauges.inflight, snap.gauges.backlog, snap.failed) == (0, 4 - dead, 0)
    assert snap.conserved


async def test_cancelling_the_pool_from_outside_puts_every_job_back(make_backend, autojump_clock):
    backend = await make_backend()

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(10)

    with trio.move_on_after(15):
        async with trioqueue.open_worker_pool(backend, slow, workers=3):
            for i in range(10):
                await Queue(backend).enqueue(i)
    # 3 finished at t=10; 3 more were running at t=15 and were cancelled
    snap = await backend.stats()
    assert snap.succeeded == 3
    assert await backend.pending() == 7 - interrupted_to_dead(make_backend, 3)
    assert snap.gauges.inflight == 0
    assert snap.conserved


@pytest.mark.server_clock
async def test_a_negative_grace_is_refused(make_backend):
    async with trioqueue.open_worker_pool(await make_backend(), collect([])) as pool:
        with pytest.raises(trioqueue.ConfigurationError, match="grace"):
            await pool.shutdown(grace=-1)


async def test_an_interrupted_handler_runs_again_only_where_the_queue_redelivers(
    make_backend, autojump_clock
):
    backend = await make_backend()
    runs: list[str] = []

    async def stuck(job: trioqueue.Job) -> None:
        runs.append(job.id)
        await trio.sleep(1000)

    async with trioqueue.open_worker_pool(backend, stuck, workers=1) as pool:
        await Queue(backend).enqueue("charge", id="pay-1")
        await trio.sleep(1)
        report = await pool.shutdown(grace=1)
    assert (runs, report.cancelled) == (["pay-1"], 1)
    snap = await backend.stats()
    if make_backend.redelivers:  # at least once: back on the queue, to run again
        assert (report.released, await backend.pending(), snap.dead_lettered) == (1, 1, 0)
    else:  # at most once: its handler may have charged; kept as a dead letter instead
        assert (report.released, await backend.pending()) == (0, 0)
        [dead] = await backend.dead_letters()
        assert dead.id == "pay-1"
        assert "never runs a job twice" in (dead.reason or "")
    assert snap.conserved
