"""Handler outcomes: ack, retry with backoff, dead letters, Retry, Drop, requeue_dead."""

from __future__ import annotations

import itertools

import pytest
import trio

import trioqueue
from trioqueue import Drop, JobNotFound, JobState, Queue, Retry, RetryPolicy


class Boom(Exception):
    pass


@pytest.mark.server_clock
async def test_a_returning_handler_completes_the_job(make_backend, autojump_clock):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> str:
        return "ok"

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue({"x": 1}, id="j")
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts, record.queued) == (JobState.COMPLETED, 1, False)
    snap = await backend.stats()
    assert (snap.processed, snap.succeeded, snap.failed, snap.retries) == (1, 1, 0, 0)
    assert snap.handler_time.count == 1
    assert snap.end_to_end.count == 1


@pytest.mark.server_clock
async def test_a_failure_is_retried_and_then_succeeds(make_backend, autojump_clock):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        if job.attempt == 1:
            raise Boom("first attempt fails")

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue("p", id="j")
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.COMPLETED, 2)
    assert record.last_error is not None
    assert record.last_error.message == "first attempt fails"
    assert record.last_error.type.endswith("Boom")
    assert record.last_error.attempt == 1  # a completed job's error is an earlier attempt's
    snap = await backend.stats()
    assert (snap.processed, snap.succeeded, snap.failed, snap.retries) == (2, 1, 1, 1)


async def test_a_last_error_names_its_attempt_when_later_ones_raised_none(
    make_backend, autojump_clock
):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        if job.attempt == 1:
            raise Boom("first attempt fails")
        if job.attempt == 2:
            raise Retry(delay=1)  # another attempt, no error

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue("p", id="j")
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.COMPLETED, 3)
    assert record.last_error is not None
    assert (record.last_error.message, record.last_error.attempt) == ("first attempt fails", 1)


async def test_exhausted_attempts_dead_letter_the_job_with_its_last_error(
    make_backend, autojump_clock
):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        raise Boom(f"attempt {job.attempt}")

    retry = RetryPolicy(max_attempts=3, base_delay=1, max_delay=4)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        await Queue(backend).enqueue("p", id="j")
    [dead] = await Queue(backend).dead_letters()
    assert (dead.id, dead.state, dead.attempts) == ("j", JobState.FAILED, 3)
    assert dead.last_error == trioqueue.ErrorInfo(type=dead.last_error.type, message="attempt 3")
    assert "in handler" in dead.last_error.traceback  # where it failed, kept with it
    assert dead.last_error.attempt == 3
    assert dead.reason == "failed 3 of 3 attempts"
    snap = await backend.stats()
    assert (snap.processed, snap.failed, snap.retries, snap.dead_lettered) == (3, 3, 2, 1)
    assert snap.gauges.dead == 1
    assert snap.conserved


async def test_retry_delays_follow_the_policy_and_the_seed(make_backend, autojump_clock):
    retry = RetryPolicy(max_attempts=6, base_delay=1.0, max_delay=5.0)

    async def run(seed: int) -> list[float]:
        backend = await make_backend()
        starts: list[float] = []

        async def handler(job: trioqueue.Job) -> None:
            starts.append(trio.current_time())
            raise Boom("always")

        async with trioqueue.open_worker_pool(backend, handler, retry=retry, seed=seed):
            await Queue(backend).enqueue("p")
        return [b - a for a, b in itertools.pairwise(starts)]

    gaps = await run(seed=7)
    assert len(gaps) == 5
    for n, gap in enumerate(gaps, start=1):
        assert 0 <= gap <= min(5.0, 1.0 * 2 ** (n - 1)) + 1e-9
    assert gaps == pytest.approx(await run(seed=7), abs=1e-9)
    assert gaps != pytest.approx(await run(seed=8), abs=1e-9)


async def test_raising_retry_runs_the_job_again_after_the_delay(make_backend, autojump_clock):
    backend = await make_backend()
    starts: list[float] = []

    async def handler(job: trioqueue.Job) -> None:
        starts.append(trio.current_time())
        if job.attempt == 1:
            raise Retry(delay=7.5)
        if job.attempt == 2:
            raise Retry()

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue("p", id="j")
    assert [s - starts[0] for s in starts] == [0, 7.5, 7.5]
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts, record.last_error) == (JobState.COMPLETED, 3, None)
    snap = await backend.stats()
    assert (snap.retries, snap.failed) == (2, 0)  # asking for a retry is not a failure


@pytest.mark.server_clock
async def test_retry_with_no_attempts_left_dead_letters(make_backend, autojump_clock):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        raise Retry()

    retry = RetryPolicy(max_attempts=2)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        await Queue(backend).enqueue("p", id="j")
    [dead] = await backend.dead_letters()
    assert dead.reason == "the handler raised Retry after attempt 2 of 2"
    assert dead.last_error is None


@pytest.mark.server_clock
async def test_drop_finishes_the_job_without_dead_lettering(make_backend, autojump_clock):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        raise Drop("not wanted")

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue("p", id="j")
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.reason, record.attempts) == (JobState.DROPPED, "not wanted", 1)
    assert await backend.dead_letters() == []
    snap = await backend.stats()
    assert (snap.dropped, snap.failed, snap.dead_lettered, snap.processed) == (1, 0, 0, 1)
    assert snap.conserved


@pytest.mark.server_clock
async def test_requeue_dead_puts_the_job_back_with_fresh_attempts(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    healthy = False

    async def handler(job: trioqueue.Job) -> None:
        if not healthy:
            raise Boom("down")

    retry = RetryPolicy(max_attempts=2, base_delay=0.1)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        await queue.enqueue("p", id="j")
    requeued = await queue.requeue_dead("j")
    assert (requeued.state, requeued.attempts, requeued.queued) == (JobState.RECEIVED, 0, True)
    assert await queue.dead_letters() == []
    healthy = True
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        pass
    record = await queue.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.COMPLETED, 1)
    snap = await backend.stats()
    assert (snap.dead_lettered, snap.dead_requeued, snap.succeeded) == (1, 1, 1)
    assert snap.conserved


@pytest.mark.server_clock
async def test_requeue_dead_of_an_unknown_id_says_so(make_backend):
    queue = Queue(await make_backend())
    await queue.enqueue("p", id="alive")
    for job_id in ("missing", "alive"):
        with pytest.raises(JobNotFound, match=rf"no job '{job_id}' among the dead letters"):
            await queue.requeue_dead(job_id)


@pytest.mark.server_clock
async def test_purge_dead_forgets_dead_letters_but_not_their_count(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        raise Boom("always")

    async with trioqueue.open_worker_pool(backend, handler, retry=RetryPolicy(max_attempts=1)):
        for i in range(3):
            await queue.enqueue(i, id=str(i))
    assert await queue.purge_dead("1") == 1
    assert await queue.purge_dead("1") == 0
    assert sorted(r.id for r in await queue.dead_letters()) == ["0", "2"]
    assert await queue.purge_dead() == 2
    assert await queue.dead_letters() == []
    assert await queue.status("0") is None
    snap = await queue.stats()
    assert (snap.dead_lettered, snap.gauges.dead) == (3, 0)
    assert snap.conserved


async def test_dead_letters_come_a_page_at_a_time_oldest_first(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        raise Boom("always")

    for i in range(5):  # one at a time: the order they die in is the order they came
        await queue.enqueue(i, id=f"d{i}")
        async with trioqueue.open_worker_pool(backend, handler, retry=RetryPolicy(max_attempts=1)):
            pass
        await trio.sleep(1)
    every = [r.id for r in await queue.dead_letters()]
    assert every == ["d0", "d1", "d2", "d3", "d4"]
    pages = [[r.id for r in await queue.dead_letters(offset=o, limit=2)] for o in (0, 2, 4, 6)]
    assert pages == [["d0", "d1"], ["d2", "d3"], ["d4"], []]
    assert [r.id for r in await queue.dead_letters(offset=3)] == ["d3", "d4"]
    assert await queue.dead_letters(limit=0) == []
    assert await queue.purge_dead("d1") == 1  # what is left moves up one place
    assert [r.id for r in await queue.dead_letters(offset=1, limit=2)] == ["d2", "d3"]
    for bad in ({"offset": -1}, {"limit": -1}, {"limit": 1.5}, {"offset": True}):
        with pytest.raises(ValueError, match="give a whole number >= 0"):
            await queue.dead_letters(**bad)
