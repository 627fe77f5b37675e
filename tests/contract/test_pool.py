"""The pool itself: concurrency, handler timeouts, no deadlock, sleepers off the workers."""

from __future__ import annotations

import functools

import pytest
import trio

import trioqueue
from trioqueue import ConfigurationError, JobState, Queue, Retry, RetryPolicy


async def test_at_most_workers_handlers_run_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    running = 0
    peak = 0
    last_end = 0.0

    async def handler(job: trioqueue.Job) -> None:
        nonlocal running, peak, last_end
        running += 1
        peak = max(peak, running)
        await trio.sleep(1)
        running -= 1
        last_end = trio.current_time()

    async with trioqueue.open_worker_pool(backend, handler, workers=3) as pool:
        for i in range(20):
            await Queue(backend).enqueue(i)
        await trio.sleep(0.5)
        assert pool.running == 3  # every worker busy, the other jobs wait
    assert peak == 3
    # ceil(20 / 3) rounds of one second (the pool's closing after that is not the subject:
    # on Redis, ending its wait for jobs takes real round trips a mock clock may jump over)
    assert last_end == 7


async def test_a_handler_timeout_is_an_ordinary_failure_that_is_retried(
    make_backend, autojump_clock
):
    backend = await make_backend()

    async def handler(job: trioqueue.Job) -> None:
        if job.attempt == 1:
            await trio.sleep(100)

    retry = RetryPolicy(max_attempts=3, base_delay=1, max_delay=1)
    async with trioqueue.open_worker_pool(backend, handler, handler_timeout=2, retry=retry):
        await Queue(backend).enqueue("p", id="j")
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.COMPLETED, 2)
    assert record.last_error is not None
    assert record.last_error.type == "TimeoutError"
    assert "handler_timeout=2s" in record.last_error.message
    snap = await backend.stats()
    assert (snap.failed, snap.retries, snap.succeeded) == (1, 1, 1)
    assert trio.current_time() <= 2 + 1


async def test_capacity_one_with_always_failing_jobs_dead_letters_all_without_deadlock(
    make_backend, autojump_clock
):
    """The seed's deadlock test: retries must not sleep on the full queue."""
    backend = await make_backend(capacity=1)

    async def handler(job: trioqueue.Job) -> None:
        raise RuntimeError("always fails")

    retry = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=2)
    with trio.fail_after(3600):  # on the mock clock: a deadlock fails, it does not hang
        async with trioqueue.open_worker_pool(backend, handler, workers=1, retry=retry):
            for i in range(10):
                await Queue(backend).enqueue(i, id=str(i))
    dead = await backend.dead_letters()
    assert sorted(r.id for r in dead) == sorted(str(i) for i in range(10))
    assert all(r.attempts == 3 for r in dead)
    snap = await backend.stats()
    assert (snap.dead_lettered, snap.failed, snap.retries, snap.gauges.held) == (10, 30, 20, 0)


async def test_a_job_waiting_to_retry_does_not_hold_a_worker(make_backend, autojump_clock):
    backend = await make_backend()
    finished: dict[str, float] = {}

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "slow-retry" and job.attempt == 1:
            raise Retry(delay=10)
        finished[job.id] = trio.current_time()

    async with trioqueue.open_worker_pool(backend, handler, workers=1) as pool:
        queue = Queue(backend)
        await queue.enqueue("a", id="slow-retry")
        await trio.sleep(1)
        await queue.enqueue("b", id="other")
        await trio.sleep(1)
        assert pool.held == 1  # the sleeper still holds its job
    # "other" did not wait behind the sleeping retry (it would finish at 10 or later),
    # and the retry kept its delay; on Redis a slow reply on a busy machine can let
    # the mock clock run a fraction of a second further
    assert finished["other"] < 2
    assert 10 <= finished["slow-retry"] < 11


@pytest.mark.server_clock
async def test_a_producer_blocked_on_a_full_queue_with_failing_workers_finishes(
    make_backend, autojump_clock
):
    backend = await make_backend(capacity=1)
    attempts = 0

    async def handler(job: trioqueue.Job) -> None:
        nonlocal attempts
        attempts += 1
        if job.attempt < 3:
            raise RuntimeError("fails twice")

    retry = RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=0.1)
    with trio.fail_after(3600):
        async with (
            trioqueue.open_worker_pool(backend, handler, workers=2, retry=retry),
            trio.open_nursery() as producers,
        ):
            for p in range(3):
                for i in range(5):
                    producers.start_soon(Queue(backend).enqueue, (p, i))
    snap = await backend.stats()
    assert (snap.succeeded, attempts) == (15, 45)


@pytest.mark.server_clock
async def test_prefetch_and_batches_still_run_each_job_once(make_backend, autojump_clock):
    backend = await make_backend(capacity=50)
    ids: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ids.append(job.id)
        await trio.sleep(0.01)

    async with trioqueue.open_worker_pool(backend, handler, workers=4, prefetch=8, batch_size=5):
        for i in range(200):
            await Queue(backend).enqueue(i, id=str(i))
    assert sorted(ids, key=int) == [str(i) for i in range(200)]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"workers": 0}, r"workers=0.*whole number >= 1"),
        ({"workers": 2.5}, r"workers=2.5"),
        ({"batch_size": 0}, r"batch_size=0"),
        ({"prefetch": -1}, r"prefetch=-1"),
        ({"handler_timeout": -1}, r"handler_timeout=-1.*or None"),
        ({"lease": 0}, r"lease=0"),
        ({"sweep_interval": float("nan")}, r"sweep_interval=nan"),
        ({"retry": 3}, r"pass a trioqueue.RetryPolicy"),
    ],
)
@pytest.mark.server_clock
async def test_bad_pool_settings_are_refused_before_anything_starts(make_backend, options, match):
    backend = await make_backend()
    await Queue(backend).enqueue("p")

    async def handler(job: trioqueue.Job) -> None:
        raise AssertionError("must not run")

    with pytest.raises(ConfigurationError, match=match):
        async with trioqueue.open_worker_pool(backend, handler, **options):
            pass
    assert await backend.pending() == 1


def sync_handler(job: trioqueue.Job) -> None:
    pass


class AsyncCallable:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, job: trioqueue.Job) -> None:
        self.seen.append(job.id)


@pytest.mark.parametrize(
    "handler", [sync_handler, lambda job: None, 42], ids=["def", "lambda", "int"]
)
@pytest.mark.server_clock
async def test_a_handler_that_is_not_async_is_refused_before_any_job_runs(make_backend, handler):
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    with pytest.raises(TypeError, match=r"must be an async function; define it as `async def") as e:
        async with trioqueue.open_worker_pool(backend, handler):
            pass
    assert "run_sync=True" in str(e.value)  # the other way: a blocking function in a thread
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.RECEIVED, 0)


@pytest.mark.server_clock
async def test_an_async_callable_object_and_a_partial_are_handlers(make_backend, autojump_clock):
    backend = await make_backend()
    target = AsyncCallable()
    seen: list[str] = []

    async def handler(job: trioqueue.Job, into: list[str]) -> None:
        into.append(job.id)

    for one in (target, functools.partial(handler, into=seen)):
        async with trioqueue.open_worker_pool(backend, one):
            await Queue(backend).enqueue("p")
    assert (len(target.seen), len(seen)) == (1, 1)


@pytest.mark.server_clock
async def test_a_handlers_result_is_published_to_reply_to(make_backend, autojump_clock):
    backend, replies = await make_backend(), await make_backend()

    async def handler(job: trioqueue.Job) -> object:
        if job.payload == "quiet":
            return None  # nothing to publish
        return {"thumbnail": job.payload}

    async with trioqueue.open_worker_pool(backend, handler, reply_to=Queue(replies)):
        await Queue(backend).enqueue("cat.png", id="up-1")
        await Queue(backend).enqueue("quiet", id="up-2")
    published = await replies.claim(10, lease=30, block=0)
    assert [(c.job.id, c.job.payload) for c in published] == [
        (trioqueue.reply_id("up-1"), {"thumbnail": "cat.png"})
    ]
    assert (await backend.stats()).succeeded == 2


@pytest.mark.server_clock
async def test_a_job_that_runs_again_publishes_its_reply_once(make_backend, autojump_clock):
    # retention=0 forgets a finished job at once, so the same job can run a second time
    backend, replies = await make_backend(retention=0), await make_backend()

    async def handler(job: trioqueue.Job) -> object:
        return {"for": job.payload}

    for _ in range(2):
        async with trioqueue.open_worker_pool(backend, handler, reply_to=Queue(replies)):
            await Queue(backend).enqueue("x", id="same")
    assert (await backend.stats()).succeeded == 2  # it ran twice
    snap = await replies.stats()
    assert (snap.enqueued, snap.deduplicated, snap.gauges.queue_depth) == (1, 1, 1)


@pytest.mark.server_clock
async def test_a_result_that_cannot_be_published_fails_the_attempt(make_backend, autojump_clock):
    backend, replies = await make_backend(), await make_backend()

    async def handler(job: trioqueue.Job) -> object:
        return {1, 2}  # a set: not JSON

    retry = RetryPolicy(max_attempts=2, base_delay=0.1)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry, reply_to=Queue(replies)):
        await Queue(backend).enqueue("x", id="j")
    [dead] = await backend.dead_letters()
    assert dead.last_error is not None
    assert dead.last_error.type == "TypeError"
    assert "JSON-serialisable" in dead.last_error.message
    assert (await replies.stats()).enqueued == 0


def test_reply_ids_are_stable_and_always_valid():
    assert trioqueue.reply_id("up-1") == trioqueue.reply_id("up-1") == "up-1:reply"
    long = trioqueue.reply_id("x" * 256)
    assert long.startswith("reply:")
    assert len(long) <= 256
    assert long != trioqueue.reply_id("x" * 255 + "y")
