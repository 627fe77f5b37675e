"""Bulk enqueue: many jobs in one call, one result per job, the single-job rules kept."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import IdempotencyConflict, Queue, QueueFull, Receipt

from ..conftest import collect, settle


async def test_every_job_is_accepted_in_order_and_runs_once(make_backend):
    backend = await make_backend(capacity=2000)
    queue = Queue(backend)
    # more than one of the Redis backend's slices (500 jobs per script call)
    results = await queue.enqueue_many(
        [{"n": n} for n in range(1200)], ids=[f"j{n}" if n % 2 else None for n in range(1200)]
    )
    assert all(isinstance(r, Receipt) and not r.deduplicated and r.queued for r in results)
    ids = [r.id for r in results if isinstance(r, Receipt)]
    assert ids[1::2] == [f"j{n}" for n in range(1, 1200, 2)]
    assert len(set(ids)) == 1200  # the fresh ones are fresh
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen), workers=1, prefetch=0):
        pass
    assert [job.payload for job in seen] == [{"n": n} for n in range(1200)]  # first in, first out
    snap = await backend.stats()
    assert (snap.enqueued, snap.succeeded) == (1200, 1200)


@pytest.mark.server_clock
async def test_duplicates_are_found_and_a_conflict_takes_its_place_without_stopping_the_rest(
    make_backend,
):
    queue = Queue(await make_backend())
    await queue.enqueue({"v": 1}, id="old")
    await queue.enqueue({"v": 1}, id="clash")
    results = await queue.enqueue_many(
        [{"v": 1}, {"v": 2}, {"v": 3}, {"v": 3}, {"v": 4}],
        ids=["old", "clash", "new", "new", "new"],
    )
    old, clash, new, again, other = results
    assert old == Receipt(id="old", deduplicated=True, queued=True)
    assert isinstance(clash, IdempotencyConflict)
    assert clash.job_id == "clash"
    assert new == Receipt(id="new", deduplicated=False, queued=True)
    assert again == Receipt(id="new", deduplicated=True, queued=True)  # a duplicate in the batch
    assert isinstance(other, IdempotencyConflict)
    assert (await queue.status("clash")).payload == {"v": 1}  # type: ignore[union-attr]
    assert (await queue.status("new")).payload == {"v": 3}  # type: ignore[union-attr]
    snap = await queue.stats()
    assert (snap.enqueued, snap.deduplicated, snap.conflicts) == (3, 2, 2)


@pytest.mark.server_clock
async def test_an_empty_batch_is_an_empty_list_and_still_a_checkpoint(make_backend):
    queue = Queue(await make_backend())
    with trio.testing.assert_checkpoints():
        assert await queue.enqueue_many([]) == []
    with trio.testing.assert_checkpoints():
        assert await queue.try_enqueue_many([], ids=[]) == []
    with pytest.raises(TypeError, match="not a single str; for one job use enqueue"):
        await queue.enqueue_many(["a", "b"], ids="ab")  # type: ignore[arg-type]


@pytest.mark.server_clock
async def test_a_bad_job_anywhere_in_the_batch_sends_nothing(make_backend):
    queue = Queue(await make_backend())
    with pytest.raises(TypeError, match=r"job 2 of the batch \(nothing was sent\).*JSON"):
        await queue.enqueue_many([1, 2, {3}, 4], ids=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match=r"job 1 of the batch .*1 to 256"):
        await queue.submit_many([1, 2], ids=["a", ""])
    with pytest.raises(ValueError, match="got 2 payloads and 1 ids"):
        await queue.try_enqueue_many([1, 2], ids=["a"])
    assert await queue.status("a") is None
    assert (await queue.stats()).enqueued == 0


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_without_waiting_the_jobs_past_a_full_queue_get_queue_full(make_backend):
    queue = Queue(await make_backend(capacity=2))
    await queue.enqueue("x", id="x")
    results = await queue.try_enqueue_many(["a", "b", "x", "c"], ids=["a", "b", "x", "c"])
    assert results[0] == Receipt(id="a", deduplicated=False, queued=True)
    assert isinstance(results[1], QueueFull)
    assert results[2] == Receipt(id="x", deduplicated=True, queued=True)  # found even when full
    assert isinstance(results[3], QueueFull)
    assert await queue.status("b") is None
    assert (await queue.stats()).gauges.queue_depth == 2


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_submit_many_stores_what_does_not_fit(make_backend):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    results = await queue.submit_many(["a", "b", "c", "d"], ids=["a", "b", "c", "d"])
    assert [(r.id, r.queued) for r in results if isinstance(r, Receipt)] == [
        ("a", True),
        ("b", True),
        ("c", False),
        ("d", False),
    ]
    snap = await queue.stats()
    assert (snap.gauges.queue_depth, snap.gauges.backlog, snap.enqueued) == (2, 4, 4)


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_enqueue_many_waits_for_room_job_by_job(make_backend, nursery):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    done = trio.Event()
    results: list[trioqueue.AddResult] = []

    async def producer() -> None:
        results.extend(await queue.enqueue_many(["a", "b", "c", "d"], ids=["a", "b", "c", "d"]))
        done.set()

    nursery.start_soon(producer)
    with trio.fail_after(10):  # it puts in what fits; on a busy machine a reply may be slow
        while (await queue.stats()).gauges.queue_depth < 2:  # noqa: ASYNC110 - in the backend
            await trio.sleep(0.01)
    await settle()  # and has had its chance to put in more
    assert not done.is_set()
    assert (await queue.stats()).gauges.queue_depth == 2
    assert await queue.status("c") is None
    for expected in ("a", "b"):  # each claim frees room for one more, never more
        [claim] = await backend.claim(1, lease=30, block=1)
        assert claim.job.id == expected
    await done.wait()
    assert [r.id for r in results if isinstance(r, Receipt)] == ["a", "b", "c", "d"]
    assert (await queue.stats()).gauges.queue_depth == 2


@pytest.mark.not_on_stream
async def test_cancelled_while_waiting_the_jobs_before_were_accepted_and_a_retry_finishes(
    make_backend, autojump_clock
):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    batch, ids = ["a", "b", "c"], ["a", "b", "c"]
    with trio.move_on_after(5) as scope:
        await queue.enqueue_many(batch, ids=ids)
    assert scope.cancelled_caught
    assert await queue.status("a") is not None
    assert await queue.status("b") is None
    assert (await queue.stats()).enqueued == 1
    # room for everything now: the same batch again finishes it
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen)):
        again = await queue.enqueue_many(batch, ids=ids)
    assert [(r.id, r.deduplicated) for r in again if isinstance(r, Receipt)] == [
        ("a", True),
        ("b", False),
        ("c", False),
    ]
    assert sorted(job.id for job in seen) == ["a", "b", "c"]
