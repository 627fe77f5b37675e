"""What only the memory backend does (the contract suite covers the rest)."""

from __future__ import annotations

import time

import pytest
import trio

import trioqueue
from trioqueue import Queue, RetryPolicy


async def test_records_carry_wall_clock_times_spaced_by_trios_clock(autojump_clock):
    backend = trioqueue.MemoryBackend()
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    await trio.sleep(100)  # on the mock clock: no real time passes
    await queue.enqueue("b", id="b")
    first, second = await queue.status("a"), await queue.status("b")
    assert first is not None
    assert second is not None
    assert abs(first.created_at - time.time()) < 60  # a date, as on Redis
    assert second.created_at - first.created_at == 100  # exact, as Trio's clock


KIB = 1024


def _held(backend: trioqueue.MemoryBackend) -> int:
    return backend.memory_held


async def test_a_memory_budget_refuses_what_would_pass_it_and_loses_nothing_held():
    backend = trioqueue.MemoryBackend(2, max_bytes=64 * KIB)
    queue = Queue(backend)
    stored: list[str] = []
    refused = None
    for n in range(100):  # 2 ready, the rest stored beyond the capacity (202)
        try:
            await queue.submit("x" * 4000, id=f"j{n}")
        except trioqueue.MemoryFull as exc:
            refused = exc
            break
        stored.append(f"j{n}")
    assert 10 <= len(stored) < 16  # about 4 KiB each, and each record's own cost
    assert isinstance(refused, trioqueue.QueueFull)  # try_enqueue callers catch it
    assert "max_bytes (64 KiB)" in str(refused)
    assert _held(backend) <= 64 * KIB
    with pytest.raises(trioqueue.MemoryFull):  # a delayed job counts as much
        await queue.submit("y", id="small-but-no-room", delay=60)
    # nothing held was dropped to make room, and a refused id was not stored
    assert [await queue.status(i) is not None for i in stored] == [True] * len(stored)
    assert await queue.status("small-but-no-room") is None
    assert (await queue.stats()).conserved


async def test_finished_records_give_way_to_new_jobs_under_the_budget(autojump_clock):
    backend = trioqueue.MemoryBackend(10, max_bytes=64 * KIB)
    queue = Queue(backend)

    async def done(job: trioqueue.Job) -> object:
        return "r" * 2000  # results count too

    async with trioqueue.open_worker_pool(backend, done):
        for n in range(200):  # far more than fit at once: finished ones are evicted
            await queue.enqueue("x" * 2000, id=f"j{n}")
    assert _held(backend) <= 64 * KIB
    assert await queue.status("j0") is None  # the oldest finished went first
    latest = await queue.status("j199")
    assert latest is not None
    assert latest.result == "r" * 2000
    snap = await queue.stats()
    assert (snap.succeeded, snap.conserved) == (200, True)


async def test_enqueue_waits_for_the_budget_as_for_capacity(autojump_clock):
    backend = trioqueue.MemoryBackend(100, max_bytes=32 * KIB)
    queue = Queue(backend)
    accepted = 0
    done = trio.Event()

    async def produce() -> None:
        nonlocal accepted
        for n in range(20):
            await queue.enqueue("x" * 4000, id=f"j{n}")
            accepted += 1
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(1)
        assert 5 <= accepted < 8  # the budget, not the capacity of 100, holds it
        start = trio.current_time()
        # finished jobs free the budget, and wake the producer: not the next sweep
        async with trioqueue.open_worker_pool(backend, _noop, sweep_interval=600):
            await done.wait()
        assert trio.current_time() - start < 60  # on the mock clock
    assert accepted == 20
    assert (await queue.stats()).succeeded == 20


async def _noop(job: trioqueue.Job) -> None:
    pass


async def test_the_budget_counts_what_it_holds_and_frees_it_again(autojump_clock):
    backend = trioqueue.MemoryBackend(retention=0, max_bytes=10 * 1024 * KIB)
    empty = _held(backend)
    queue = Queue(backend)
    await queue.enqueue("x" * 10_000, id="big")
    assert _held(backend) - empty >= 10_000
    async with trioqueue.open_worker_pool(backend, _noop):
        pass
    assert _held(backend) == empty  # retention 0: the finished record is gone


def test_a_budget_below_one_job_is_refused_with_what_to_give():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(trioqueue.ConfigurationError, match="max_bytes"):
            trioqueue.MemoryBackend(max_bytes=bad)  # type: ignore[arg-type]


async def test_purging_dead_letters_wakes_a_producer_waiting_for_the_budget(autojump_clock):
    backend = trioqueue.MemoryBackend(max_bytes=32 * KIB)
    queue = Queue(backend)

    async def failing(job: trioqueue.Job) -> None:
        raise RuntimeError("dead on purpose")

    policy = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, failing, retry=policy):
        for n in range(5):
            await queue.enqueue("x" * 4000, id=f"dead-{n}")
    assert len(await queue.dead_letters()) == 5  # dead letters are never evicted
    done = trio.Event()

    async def produce() -> None:
        for n in range(3):
            await queue.enqueue("x" * 4000, id=f"new-{n}")
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(60)
        assert not done.is_set()  # the dead letters fill the budget: it waits
        assert await queue.purge_dead() == 5
        with trio.fail_after(1):  # no worker runs: the purge itself wakes it
            await done.wait()


async def test_a_job_larger_than_the_whole_budget_is_refused_not_waited_for():
    backend = trioqueue.MemoryBackend(max_bytes=8 * KIB)
    with trio.fail_after(1), pytest.raises(trioqueue.MemoryFull, match="max_bytes"):
        await Queue(backend).enqueue("x" * 10_000, id="huge")  # never fits: no wait
    assert _held(backend) == 0


async def test_a_job_too_large_for_the_budget_evicts_no_finished_record(autojump_clock):
    backend = trioqueue.MemoryBackend(max_bytes=32 * KIB)
    queue = Queue(backend)
    async with trioqueue.open_worker_pool(backend, _noop):
        for n in range(3):
            await queue.enqueue("x", id=f"done-{n}")
    with pytest.raises(trioqueue.MemoryFull):
        await queue.submit("x" * 40_000, id="huge")
    assert [await queue.status(f"done-{n}") is not None for n in range(3)] == [True] * 3


async def test_room_freed_at_once_lets_every_waiting_producer_in(autojump_clock):
    backend = trioqueue.MemoryBackend(max_bytes=32 * KIB)
    queue = Queue(backend)

    async def fails(job: trioqueue.Job) -> None:
        raise RuntimeError("dead on purpose")

    async with trioqueue.open_worker_pool(backend, fails, retry=RetryPolicy(max_attempts=1)):
        for n in range(5):
            await queue.enqueue("x" * 4000, id=f"dead-{n}")
    await queue.enqueue("x" * 4000, id="fits")  # the budget is full now
    done: list[int] = []

    async def produce(n: int) -> None:
        await queue.enqueue("y" * 4000, id=f"new-{n}")
        done.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(produce, n)
        await trio.sleep(60)
        assert done == []
        await queue.purge_dead()
        await trio.sleep(1)  # on the mock clock; no pool runs that could wake them later
        assert sorted(done) == [0, 1, 2]  # all three fit now, and all were woken


async def test_a_debounced_job_refused_for_the_budget_replaces_nothing(autojump_clock):
    backend = trioqueue.MemoryBackend(max_bytes=4000)
    queue = trioqueue.Queue(backend)
    await queue.enqueue("small", id="A", unique_key="k", debounce=5)
    with pytest.raises(trioqueue.MemoryFull):
        await queue.try_enqueue("x" * 5000, id="B", unique_key="k", debounce=5)
    record = await queue.status("A")
    assert record is not None
    assert record.state is trioqueue.JobState.SCHEDULED  # still the one waiting
    assert await queue.status("B") is None
