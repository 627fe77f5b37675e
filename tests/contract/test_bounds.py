"""Bounds and backpressure: the ready buffer never exceeds its capacity."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import ConfigurationError, Queue, QueueFull

from ..conftest import settle


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_try_enqueue_on_a_full_queue_raises_and_accepts_nothing(make_backend):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    await queue.try_enqueue({"n": 1})
    await queue.try_enqueue({"n": 2})
    with pytest.raises(QueueFull, match=r"full \(2 ready jobs\).*enqueue\(\)"):
        await queue.try_enqueue({"n": 3}, id="third")
    assert await queue.status("third") is None
    snap = await queue.stats()
    assert (snap.enqueued, snap.gauges.queue_depth, await backend.pending()) == (2, 2, 2)


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_enqueue_waits_for_room_then_accepts(make_backend, nursery):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue("first")
    accepted = trio.Event()

    async def producer() -> None:
        await queue.enqueue("second", id="second")
        accepted.set()

    nursery.start_soon(producer)
    await settle()
    assert not accepted.is_set()
    assert await queue.status("second") is None
    assert (await queue.stats()).gauges.queue_depth == 1

    [claim] = await backend.claim(1, lease=30, block=1)
    assert claim.job.payload == "first"
    await accepted.wait()
    record = await queue.status("second")
    assert record is not None
    assert record.queued
    assert (await queue.stats()).gauges.queue_depth == 1


@pytest.mark.not_on_stream
async def test_an_enqueue_cancelled_while_waiting_accepts_nothing(make_backend, autojump_clock):
    queue = Queue(await make_backend(capacity=1))
    await queue.enqueue("first")
    with trio.move_on_after(5) as scope:
        await queue.enqueue("second", id="second")
    assert scope.cancelled_caught
    assert await queue.status("second") is None
    assert (await queue.stats()).enqueued == 1


@pytest.mark.not_on_stream
@pytest.mark.parametrize("capacity", [0, -1])
@pytest.mark.server_clock
async def test_capacity_below_one_is_refused(make_backend, capacity):
    with pytest.raises(ConfigurationError, match=r"capacity.*>= 1"):
        await make_backend(capacity=capacity)


def test_memory_backend_refuses_a_non_integer_capacity():
    with pytest.raises(ConfigurationError, match="whole number"):
        trioqueue.MemoryBackend(2.5)  # type: ignore[arg-type]


@pytest.mark.not_on_stream
async def test_the_ready_queue_never_exceeds_capacity_during_a_run(make_backend, autojump_clock):
    capacity = 3
    backend = await make_backend(capacity=capacity)
    depths: list[int] = []

    async def handler(job: trioqueue.Job) -> None:
        depths.append((await backend.stats()).gauges.queue_depth)
        await trio.sleep(0.5)
        if job.attempt == 1 and job.payload % 3 == 0:
            raise RuntimeError("fail once")

    retry = trioqueue.RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=1)
    async with trioqueue.open_worker_pool(backend, handler, workers=2, retry=retry) as pool:
        queue = Queue(pool.backend)
        for i in range(30):
            await queue.enqueue(i)
            depths.append((await backend.stats()).gauges.queue_depth)
    assert max(depths) == capacity  # reached, never exceeded
    assert (await backend.stats()).succeeded == 30
