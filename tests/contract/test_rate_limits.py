"""Rate limits: at most so many starts per window, for the queue and for each rate key.

Start times are read on Trio's clock, which the Redis backends' scripts use too
(``clock=trio.current_time``). Each pool has more workers than jobs, so a job
starts when it is claimed.
"""

from __future__ import annotations

import collections

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, RateLimit, RateLimits


async def assert_conserved(backend: trioqueue.Backend) -> None:
    snap = await backend.stats()
    assert snap.conserved, snap


def most_in_a_window(starts: list[float], per: float) -> int:
    """The most of *starts* any half-open window of *per* seconds holds (less the
    microseconds of float error the arithmetic forgives: see RateLimit.slack)."""
    starts = sorted(starts)
    return max(
        (sum(1 for t in starts[i:] if t < first + per - 1e-4) for i, first in enumerate(starts)),
        default=0,
    )


def recorder(ran: list[int], count: int) -> tuple[trioqueue.Handler, trio.Event]:
    """A handler appending each job's ``n`` to *ran*, and an event set at *count* of them."""
    enough = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.payload["n"])
        if len(ran) == count:
            enough.set()

    return handler, enough


async def run_all(backend, count, started, *, workers=40):
    async def handler(job: trioqueue.Job) -> None:
        started[job.payload.get("key")].append(trio.current_time())

    async with trioqueue.open_worker_pool(
        backend, handler, workers=workers, poll_interval=0.5
    ) as pool:
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert sum(len(times) for times in started.values()) == count


async def test_the_queue_limit_spreads_starts_out(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(queue=RateLimit(5, per=1.0))
    assert await queue.rate_limits() == RateLimits(queue=RateLimit(5, per=1.0))
    await queue.enqueue_many([{"n": n} for n in range(10)])
    began = trio.current_time()
    started: dict[str | None, list[float]] = collections.defaultdict(list)
    await run_all(backend, 10, started)
    times = started[None]
    assert most_in_a_window(times, 1.0) <= 5
    # one every 0.2 s: the last at about 1.8 s, not held back longer than a poll
    assert 1.7 <= max(times) - began <= 1.8 + 0.6
    await assert_conserved(backend)


async def test_a_burst_lets_that_many_start_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    limit = RateLimit(4, per=2.0, burst=4)
    await queue.set_rate_limits(queue=limit)
    await queue.enqueue_many([{"n": n} for n in range(8)])
    began = trio.current_time()
    started: dict[str | None, list[float]] = collections.defaultdict(list)
    await run_all(backend, 8, started)
    times = sorted(t - began for t in started[None])
    assert times[3] < 0.1  # four at once
    assert most_in_a_window(times, 2.0) <= limit.most_in_any_window
    await assert_conserved(backend)


@pytest.mark.not_on_stream
async def test_each_rate_key_is_limited_alone_and_others_go_ahead(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(2, per=1.0))
    for key in ("a", "b"):
        await queue.enqueue_many([{"key": key} for _ in range(8)], rate_key=key)
    await queue.enqueue_many([{"n": n} for n in range(5)])  # no key: no limit
    record = await queue.status((await queue.enqueue({"key": "a"}, rate_key="a")).id)
    assert record is not None
    assert record.rate_key == "a"
    began = trio.current_time()
    started: dict[str | None, list[float]] = collections.defaultdict(list)
    await run_all(backend, 22, started)
    for key, last in (("a", 4.0), ("b", 3.5)):
        assert most_in_a_window(started[key], 1.0) <= 2
        # nine of a, eight of b, one every half second
        assert last - 0.1 <= max(started[key]) - began <= last + 0.6
    # the jobs without a key were not held up behind the limited ones
    assert max(started[None]) - began < 0.1
    await assert_conserved(backend)


@pytest.mark.not_on_stream
async def test_a_job_over_its_keys_limit_waits_scheduled_and_a_cancelled_one_gives_its_turn(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(1, per=6.0))
    first = await queue.enqueue({"n": 1}, rate_key="acme")
    second = await queue.enqueue({"n": 2}, rate_key="acme")
    third = await queue.enqueue({"n": 3}, rate_key="acme")
    ran: list[int] = []
    handler, three_ran = recorder(ran, 3)

    async def due_at(receipt: trioqueue.Receipt) -> float:
        record = await queue.status(receipt.id)
        assert record is not None
        assert record.state is JobState.SCHEDULED  # waiting for the start it was given
        assert record.due_at is not None
        return record.due_at

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await trio.sleep(2)
        assert ran == [1]
        assert await due_at(third) - await due_at(second) == pytest.approx(6)
        assert await queue.cancel(third.id) is trioqueue.CancelResult.CANCELLED
        # the cancelled job's turn goes to the next one to come, not an interval after it
        fourth = await queue.enqueue({"n": 4}, rate_key="acme")
        await trio.sleep(1)
        assert await due_at(fourth) - await due_at(second) == pytest.approx(6)
        await three_ran.wait()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert ran == [1, 2, 4]
    assert (await queue.status(first.id)).state is JobState.COMPLETED
    assert (await queue.status(third.id)).state is JobState.CANCELLED
    await assert_conserved(backend)


@pytest.mark.not_on_stream
async def test_a_retry_counts_as_a_start_of_its_key(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(1, per=10.0))
    await queue.enqueue({"key": "a"}, id="flaky", rate_key="a")
    starts: list[float] = []
    began = trio.current_time()

    async def handler(job: trioqueue.Job) -> None:
        starts.append(trio.current_time() - began)
        if job.attempt < 3:
            raise RuntimeError("not yet")

    async with trioqueue.open_worker_pool(
        backend,
        handler,
        poll_interval=0.5,
        retry=trioqueue.RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.01),
    ) as pool:
        pool.mark_producer_finished()
        await pool.wait_stopped()
    assert len(starts) == 3
    # each attempt waited for the key's next start, ten seconds after the last
    assert most_in_a_window(starts, 10.0) == 1
    assert starts[-1] < 20 + 1
    assert (await queue.status("flaky")).state is JobState.COMPLETED
    await assert_conserved(backend)


async def test_limits_are_replaced_removed_and_followed_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    assert await queue.rate_limits() == RateLimits()
    await queue.set_rate_limits(queue=RateLimit(1, per=3600.0))
    await queue.enqueue_many([{"n": n} for n in range(6)])
    ran: list[int] = []
    handler, all_ran = recorder(ran, 6)

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await trio.sleep(10)
        assert len(ran) == 1  # one an hour
        await queue.set_rate_limits()  # no limit: the waiting pool goes on within a poll
        assert await queue.rate_limits() == RateLimits()
        with trio.fail_after(1):
            await all_ran.wait()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    await assert_conserved(backend)


@pytest.mark.not_on_stream  # a stream's jobs have no rate key
async def test_the_widest_and_busiest_limits_the_backends_take_still_limit(
    make_backend, autojump_clock
):
    """A window of 366 days and a billion starts: stored, kept and followed (not an
    overflow in a claim that stops every start)."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(
        queue=RateLimit(1_000_000_000, per=1.0, burst=1_000_000_000),
        per_key=RateLimit(1, per=366 * 86_400.0),
    )
    yearly = [await queue.enqueue({"n": n}, rate_key="yearly") for n in range(3)]
    await queue.enqueue_many([{"n": n} for n in range(3, 8)])
    ran: list[int] = []
    handler, _ = recorder(ran, 8)
    with trio.move_on_after(5):
        async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5):
            await trio.sleep_forever()
    assert sorted(ran) == [0, 3, 4, 5, 6, 7]  # one of the key's a year; the rest at once
    for receipt, turn in zip(yearly[1:], (1, 2), strict=True):
        record = await queue.status(receipt.id)
        assert record is not None
        assert record.state is JobState.SCHEDULED
        assert record.due_at == pytest.approx(record.created_at + turn * 366 * 86_400, abs=10)
    await assert_conserved(backend)


async def claimed_ns(backend: trioqueue.Backend) -> list[int]:
    """The ``n`` of each job one claim takes now (it waits for none)."""
    return [claim.job.payload["n"] for claim in await backend.claim(8, lease=60, block=0)]


@pytest.mark.not_on_stream
async def test_a_start_promised_to_a_waiting_job_is_not_taken_by_a_newcomer(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(1, per=2.0))
    began = trio.current_time()
    await queue.enqueue_many([{"n": 0}, {"n": 1}], rate_key="k")
    assert await claimed_ns(backend) == [0]  # 1 is promised the start at 2 s
    await trio.sleep_until(began + 2.0)
    # a newcomer of the key, first in line for a claim (high priority), arrives as
    # the promised start comes: the start is 1's, the newcomer waits its turn
    late = await queue.enqueue({"n": 2}, rate_key="k", priority=2)
    assert await claimed_ns(backend) == [1]
    record = await queue.status(late.id)
    assert record is not None
    assert record.state is JobState.SCHEDULED
    assert record.due_at is not None
    assert record.due_at - record.created_at == pytest.approx(2.0, abs=0.01)
    await trio.sleep_until(began + 4.0)
    assert await claimed_ns(backend) == [2]
    await assert_conserved(backend)


@pytest.mark.not_on_stream
async def test_a_late_claim_takes_the_next_free_start_and_the_keys_order_holds(
    make_backend, autojump_clock
):
    """A start taken late (30 ms after it was due) moves the key's later starts on by
    as much: each of its jobs then starts an interval after the last, in the order
    they came; none is sent to the back of the line for having woken on time."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(5, per=1.0))
    began = trio.current_time()
    await queue.enqueue_many([{"n": n} for n in range(8)], rate_key="k")
    assert await claimed_ns(backend) == [0]
    await trio.sleep_until(began + 0.23)
    starts: list[tuple[float, int]] = []
    while len(starts) < 7 and trio.current_time() < began + 5:
        # a pool that looks every 10 ms
        now = trio.current_time() - began
        starts += [(now, n) for n in await claimed_ns(backend)]
        await trio.sleep(0.01)
    assert [n for _, n in starts] == list(range(1, 8)), (
        f"a rate key's jobs started out of the order they came: {starts}"
    )
    for k, (at, n) in enumerate(starts):
        assert at == pytest.approx(0.23 + 0.2 * k, abs=0.015), (
            f"job {n} started at {at:.2f} s, not at the key's next free start"
        )
    await assert_conserved(backend)


@pytest.mark.not_on_stream
@pytest.mark.parametrize("workers", [1, 8])
async def test_a_backlog_on_one_key_starts_at_its_rate_in_the_order_it_came(
    make_backend, autojump_clock, workers
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.set_rate_limits(per_key=RateLimit(5, per=1.0))
    await queue.enqueue_many([{"n": n} for n in range(20)], rate_key="A")
    began = trio.current_time()
    starts: list[tuple[float, int]] = []

    async def handler(job: trioqueue.Job) -> None:
        starts.append((trio.current_time() - began, job.payload["n"]))
        await trio.sleep(0.01)  # a handler that takes time, far less than an interval

    with trio.fail_after(30):
        async with trioqueue.open_worker_pool(
            backend, handler, workers=workers, poll_interval=0.5
        ) as pool:
            pool.mark_producer_finished()
            await pool.wait_stopped()
    assert [n for _, n in starts] == list(range(20)), "started out of the order they came"
    times = [t for t, _ in starts]
    assert most_in_a_window(times, 1.0) <= 5
    # every start used: 5 in each second of the backlog, the last at 3.8 s
    for second in range(4):
        assert sum(1 for t in times if second - 1e-3 <= t < second + 1 - 1e-3) == 5, times
    await assert_conserved(backend)
