"""The pool against a slow or failing backend, and shutdown races (memory backend).

Each test here was a defect found in review; it fails on the code before the fix.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ConfigurationError, Drop, JobState, Queue, Retry


class Stalling:
    """A MemoryBackend whose chosen methods stall first (cancellably: then they do nothing)."""

    def __init__(self, inner: trioqueue.MemoryBackend, *, stall: set[str], times: int = 1,
                 fail: set[str] | None = None) -> None:  # fmt: skip
        self.inner, self.stall, self.times, self.fail = inner, stall, times, fail or set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in self.fail:

            async def broken(*args: Any, **kwargs: Any) -> Any:
                raise ConnectionError(f"{name}: the backend went away")

            return broken
        if name in self.stall and self.times > 0:

            async def slow(*args: Any, **kwargs: Any) -> Any:
                self.times -= 1
                await trio.sleep(3600)
                return await attr(*args, **kwargs)

            return slow
        return attr


async def test_a_shutdown_right_after_a_failure_stops_the_new_sleeper(autojump_clock):
    backend = trioqueue.MemoryBackend()
    failing = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        failing.set()
        raise Retry(delay=100)

    async with trioqueue.open_worker_pool(backend, handler, workers=1) as pool:
        await Queue(backend).enqueue("p", id="j")
        await failing.wait()  # the sleeper is being started, not yet running
        start = trio.current_time()
        report = await pool.shutdown(grace=0)
        assert trio.current_time() == start
    assert report.released == 1
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.queued) == (JobState.FAILED_RETRY, False)  # until due
    assert record.due_at is not None
    assert record.due_at - record.updated_at == pytest.approx(100)


async def test_an_outcome_the_backend_never_takes_is_given_back(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Stalling(memory, stall={"ack"})
    runs: list[int] = []

    async def handler(job: trioqueue.Job) -> None:
        runs.append(job.attempt)

    with trio.fail_after(100):  # the drain must not wait on the stuck claim
        async with trioqueue.open_worker_pool(backend, handler, io_timeout=5):
            await Queue(memory).enqueue("p", id="j")
    assert runs == [1, 1]  # at least once: the first ack never landed
    record = await memory.status("j")
    assert record is not None
    assert record.state is JobState.COMPLETED


async def test_shutdown_returns_by_grace_plus_io_timeout_even_when_the_backend_stalls(
    autojump_clock,
):
    memory = trioqueue.MemoryBackend()
    backend = Stalling(memory, stall={"ack", "release"}, times=2)

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(4.9)

    async with trioqueue.open_worker_pool(backend, handler, io_timeout=5) as pool:
        await Queue(memory).enqueue("p", id="j")
        await trio.sleep(0.1)
        start = trio.current_time()
        report = await pool.shutdown(grace=5)
        assert trio.current_time() == start + 5 + 5
    # the handler finished in the grace, but neither its ack nor the release landed:
    # the job stays claimed, for the sweeper to recover once its lease runs out
    assert (report.finished, report.cancelled, report.released, report.unreturned) == (1, 0, 0, 1)
    record = await memory.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.PROCESSING, 0)


async def test_shutdown_returns_by_its_deadline_when_a_handler_ignores_cancellation(
    autojump_clock,
):
    async def stubborn(job: trioqueue.Job) -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(500)

    backend = trioqueue.MemoryBackend()
    async with trioqueue.open_worker_pool(backend, stubborn, io_timeout=5) as pool:
        await Queue(backend).enqueue("p")
        await trio.sleep(1)
        report = await pool.shutdown(grace=1)
        assert trio.current_time() == 1 + 1 + 5
    assert (report.cancelled, report.clean) == (1, False)


async def test_a_release_that_fails_still_lets_shutdown_return(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Stalling(memory, stall=set(), fail={"release"})
    reports: list[trioqueue.ShutdownReport] = []

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(100)

    async def use_pool(task_status: trio.TaskStatus[trioqueue.WorkerPool]) -> None:
        async with trioqueue.open_worker_pool(backend, slow) as pool:
            task_status.started(pool)
            await pool.wait_stopped()

    async def run_pool(task_status: trio.TaskStatus[trioqueue.WorkerPool]) -> None:
        with pytest.raises(ConnectionError, match="went away"):
            await use_pool(task_status)

    async with trio.open_nursery() as pools:
        pool = await pools.start(run_pool)
        await Queue(memory).enqueue("p")
        await trio.sleep(1)
        with trio.fail_after(60):  # a supervisor outside the pool's nursery
            reports.append(await pool.shutdown(grace=1))
    assert reports[0].cancelled == 1


async def test_concurrent_shutdowns_share_one_true_report(autojump_clock):
    backend = trioqueue.MemoryBackend()

    async def stuck(job: trioqueue.Job) -> None:
        await trio.sleep(100)

    reports: list[trioqueue.ShutdownReport] = []
    async with trioqueue.open_worker_pool(backend, stuck) as pool:
        await Queue(backend).enqueue("p")
        await trio.sleep(1)

        async def call(grace: float) -> None:
            reports.append(await pool.shutdown(grace))

        async with trio.open_nursery() as callers:
            callers.start_soon(call, 50)
            await trio.sleep(1)
            callers.start_soon(call, 0)
    assert reports[0] is reports[1]
    assert (reports[0].cancelled, reports[0].finished, reports[0].released) == (1, 0, 1)


async def test_a_woken_producer_that_finds_a_duplicate_passes_the_room_on(nursery):
    backend = trioqueue.MemoryBackend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    done: list[str] = []

    async def produce(job_id: str) -> None:
        await queue.enqueue(job_id.upper(), id=job_id)
        done.append(job_id)

    nursery.start_soon(produce, "x")
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(produce, "y")
    await trio.testing.wait_all_tasks_blocked()
    await queue.submit("X", id="x")  # the same job as the first waiter's, stored unqueued
    await backend.claim(1, lease=30, block=0)  # "a" out, "x" moves in
    await backend.claim(1, lease=30, block=0)  # "x" out: room for one, the first waiter wakes
    await trio.testing.wait_all_tasks_blocked()
    assert sorted(done) == ["x", "y"]  # the first found a duplicate; the second got the room


@pytest.mark.parametrize("signal", [Drop("nested"), Retry(delay=1)])
async def test_a_signal_raised_inside_a_handlers_nursery_still_counts(autojump_clock, signal):
    backend = trioqueue.MemoryBackend()

    async def handler(job: trioqueue.Job) -> None:
        async def child() -> None:
            if job.attempt == 1:
                raise signal

        async with trio.open_nursery() as inner:
            inner.start_soon(child)

    async with trioqueue.open_worker_pool(backend, handler):
        await Queue(backend).enqueue("p", id="j")
    snap = backend.metrics.snapshot()
    assert snap.failed == 0
    assert (snap.dropped, snap.succeeded) == ((1, 0) if isinstance(signal, Drop) else (0, 1))


async def test_a_pool_with_every_worker_busy_claims_nothing_more(autojump_clock):
    backend = trioqueue.MemoryBackend()
    started: dict[str, tuple[str, float]] = {}

    async def slow(job: trioqueue.Job) -> None:
        started[job.id] = ("busy pool", trio.current_time())
        await trio.sleep(100)

    async def fast(job: trioqueue.Job) -> None:
        started[job.id] = ("idle pool", trio.current_time())

    async with trioqueue.open_worker_pool(backend, slow, workers=1, prefetch=0) as busy:
        await Queue(backend).enqueue(1, id="j1")
        await Queue(backend).enqueue(2, id="j2")
        await trio.sleep(1)
        assert busy.held == 1
        async with trioqueue.open_worker_pool(backend, fast, workers=1):
            pass  # drains only when the busy pool's job is done too
    assert started == {"j1": ("busy pool", 0), "j2": ("idle pool", 1)}


async def test_claims_that_could_not_be_released_are_no_longer_renewed(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Stalling(memory, stall={"release"})

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(100)

    async with trioqueue.open_worker_pool(backend, slow, lease=3, io_timeout=1) as pool:
        await Queue(memory).enqueue("p", id="j")
        await trio.sleep(1)
        await pool.shutdown(grace=0)
        await trio.sleep(10)  # the body goes on; the lease renewer still runs
        await memory.sweep()
    assert memory.metrics.snapshot().recovered == 1


async def test_the_bodys_error_survives_a_failing_teardown(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Stalling(memory, stall=set(), fail={"release"})

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(100)

    async def use() -> None:
        async with trioqueue.open_worker_pool(backend, slow):
            await Queue(memory).enqueue("p")
            await trio.sleep(1)
            raise KeyError("the body's own error")

    with pytest.raises(ExceptionGroup) as info:
        await use()
    assert info.group_contains(KeyError)
    assert info.group_contains(ConnectionError)


@pytest.mark.parametrize("delay", [math.inf, -1, float("nan"), "5", True])
def test_retry_refuses_a_delay_that_is_not_a_finite_number(delay):
    with pytest.raises(ConfigurationError, match="finite number of seconds"):
        Retry(delay=delay)


@pytest.mark.parametrize("grace", [-1, math.inf])
async def test_a_bad_grace_names_shutdown(grace):
    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(trioqueue.MemoryBackend(), handler) as pool:
        with pytest.raises(ConfigurationError, match=r"WorkerPool.shutdown\(grace="):
            await pool.shutdown(grace)


class MarksSuspects:
    """A MemoryBackend that hands out job "s" as a suspect (as Redis does after crashes)."""

    def __init__(self, inner: trioqueue.MemoryBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[trioqueue.Claim]:
        # one at a time, so the suspect comes alone, as Redis hands it out
        claims = await self.inner.claim(1, lease=lease, block=block)
        return [attrs.evolve(c, suspect=True) if c.job.id == "s" else c for c in claims]


async def test_a_suspect_runs_with_no_other_handler_beside_it(autojump_clock):
    backend = MarksSuspects(trioqueue.MemoryBackend(capacity=10))
    running: set[str] = set()
    beside_suspect: list[set[str]] = []

    async def handler(job: trioqueue.Job) -> None:
        running.add(job.id)
        if job.id == "s":
            beside_suspect.append(set(running) - {"s"})
        elif "s" in running:
            beside_suspect.append({job.id})
        await trio.sleep(1 if job.id == "s" else 2)
        running.discard(job.id)

    async with trioqueue.open_worker_pool(backend, handler, workers=4, prefetch=4) as pool:  # type: ignore[arg-type]
        for job_id in ("a", "b", "s", "c", "d"):
            await Queue(backend).enqueue(job_id, id=job_id)  # type: ignore[arg-type]
        del pool
    assert beside_suspect == [set()]  # nothing ran beside it, before or after it started
    assert (await backend.stats()).succeeded == 5


async def test_the_pool_never_holds_more_than_its_workers_and_prefetch(autojump_clock):
    # the fetcher gathers free places while prefetched jobs remain, then claims: every
    # claim must fit in the places it holds, and every job must still run once
    backend = trioqueue.MemoryBackend(capacity=1000)
    workers, prefetch = 4, 8
    sizes: list[int] = []
    pools: list[trioqueue.WorkerPool] = []
    ran: list[int] = []

    class Checking:
        def __getattr__(self, name: str) -> Any:
            return getattr(backend, name)

        async def claim(self, max_jobs: int, *, lease: float, block: float) -> Any:
            claims = await backend.claim(max_jobs, lease=lease, block=block)
            assert len(claims) <= max_jobs
            assert pools[0].held + len(claims) <= workers + prefetch
            sizes.append(len(claims))
            return claims

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(0.01 * (1 + job.payload % 5))
        ran.append(job.payload)

    queue = Queue(backend)
    for i in range(200):
        await queue.enqueue(i)
    async with trioqueue.open_worker_pool(
        Checking(),  # type: ignore[arg-type]
        handler,
        workers=workers,
        prefetch=prefetch,
        batch_size=8,
    ) as pool:
        pools.append(pool)
    assert sorted(ran) == list(range(200))
    assert max(sizes) > 1  # claims do carry several jobs


async def test_one_cause_failing_the_pool_and_its_body_is_raised_once(autojump_clock):
    memory = trioqueue.MemoryBackend()

    class Misconfigured:
        def __getattr__(self, name: str) -> Any:
            return getattr(memory, name)

        async def claim(self, *args: Any, **kwargs: Any) -> Any:
            raise ConfigurationError("queue set up with capacity=10 by others")

        async def add(self, *args: Any, **kwargs: Any) -> Any:
            with trio.CancelScope(shield=True):  # as a Redis script: it runs to its reply
                await trio.sleep(1)  # the pool fails meanwhile, on the same cause
            raise ConfigurationError("queue set up with capacity=10 by others")

    async def handler(job: trioqueue.Job) -> None:
        raise AssertionError("no job is ever claimed")

    with pytest.raises(ConfigurationError, match="capacity=10") as caught:
        async with trioqueue.open_worker_pool(Misconfigured(), handler):  # type: ignore[arg-type]
            await Queue(Misconfigured()).enqueue("p")  # type: ignore[arg-type]
    assert not isinstance(caught.value, BaseExceptionGroup)


async def test_a_dead_letter_is_a_warning_and_where_it_failed_is_logged_at_debug(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    backend = trioqueue.MemoryBackend()

    async def handler(job: trioqueue.Job) -> None:
        raise KeyError("no such user")

    caplog.set_level(logging.DEBUG, logger="trioqueue.pool")
    retry = trioqueue.RetryPolicy(max_attempts=2, base_delay=1, max_delay=1)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        await Queue(backend).enqueue("p", id="j")
    [dead] = [r for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert dead.levelno == logging.WARNING
    assert "KeyError: 'no such user'" in dead.getMessage()
    traces = [r for r in caplog.records if r.getMessage().startswith("job j failed here:")]
    assert len(traces) == 2  # each attempt
    assert all(r.levelno == logging.DEBUG and "in handler" in r.getMessage() for r in traces)
