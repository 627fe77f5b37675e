"""Uniqueness by key while a job waits or runs, and debounce: a newer job replaces a waiting one.

A stream source refuses a unique key (every group reads each entry at once:
``test_redis_streams.py``), so these tests skip it.
"""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, Receipt, RetryPolicy

pytestmark = pytest.mark.not_on_stream


async def assert_conserved(backend: trioqueue.Backend) -> None:
    snap = await backend.stats()
    assert snap.conserved, snap


async def state_of(queue: Queue, job_id: str) -> JobState | None:
    record = await queue.status(job_id)
    return None if record is None else record.state


@pytest.mark.server_clock
async def test_a_key_held_by_a_waiting_or_running_job_finds_that_job(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    first = await queue.enqueue({"user": 7}, id="sync-1", unique_key="sync:7")
    assert (first.id, first.deduplicated) == ("sync-1", False)
    again = await queue.enqueue({"user": 7, "other": True}, id="sync-2", unique_key="sync:7")
    assert (again.id, again.deduplicated, again.queued) == ("sync-1", True, True)
    assert await queue.status("sync-2") is None  # nothing was added
    other = await queue.enqueue({"user": 8}, id="sync-3", unique_key="sync:8")
    assert not other.deduplicated
    running = trio.Event()
    finish = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "sync-1":
            running.set()
            await finish.wait()

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await running.wait()
        held = await queue.enqueue(1, id="sync-4", unique_key="sync:7")  # while it runs
        assert (held.id, held.deduplicated) == ("sync-1", True)
        finish.set()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    # finished: the key is free again
    later = await queue.enqueue(2, id="sync-5", unique_key="sync:7")
    assert (later.id, later.deduplicated) == ("sync-5", False)
    record = await queue.status("sync-5")
    assert record is not None
    assert record.unique_key == "sync:7"
    snap = await backend.stats()
    assert snap.deduplicated == 2
    await assert_conserved(backend)


@pytest.mark.parametrize("ending", ["dead", "cancel", "drop"])
@pytest.mark.server_clock
async def test_a_job_that_ends_otherwise_lets_its_key_go(make_backend, autojump_clock, ending):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="k-1", unique_key="k")

    async def handler(job: trioqueue.Job) -> None:
        if ending == "drop":
            raise trioqueue.Drop("not wanted")
        raise RuntimeError("broken")

    if ending == "cancel":
        await queue.cancel("k-1")
    else:
        async with trioqueue.open_worker_pool(
            backend, handler, retry=RetryPolicy(max_attempts=1)
        ) as pool:
            pool.mark_producer_finished()
    receipt = await queue.enqueue(2, id="k-2", unique_key="k")
    assert (receipt.id, receipt.deduplicated) == ("k-2", False)
    if ending == "dead":
        # requeued while another job holds the key: it runs, and the key stays the newer's
        await queue.requeue_dead("k-1")
        held = await queue.enqueue(3, id="k-3", unique_key="k")
        assert held.id == "k-2"
    await assert_conserved(backend)


async def test_debounce_keeps_only_the_last_job_of_a_burst(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[tuple[str, float]] = []
    start = trio.current_time()

    async def handler(job: trioqueue.Job) -> None:
        ran.append((job.id, trio.current_time() - start))

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        for n in range(4):  # a burst, one second apart: each replaces the one before
            receipt = await queue.enqueue(
                {"n": n}, id=f"save-{n}", unique_key="autosave", debounce=5
            )
            assert (receipt.id, receipt.scheduled) == (f"save-{n}", True)
            await trio.sleep(1)
        await trio.sleep(10)
        assert [job_id for job_id, _ in ran] == ["save-3"]
        assert 8 <= ran[0][1] <= 9  # 5 s after the last of the burst, at 3 s
        for n in range(3):
            record = await queue.status(f"save-{n}")
            assert record is not None
            assert record.state is JobState.CANCELLED
            assert record.reason == (
                f"replaced by job 'save-{n + 1}', enqueued later with the same unique_key"
            )
        # after it ran, the next burst starts afresh
        await queue.enqueue({"n": 4}, id="save-4", unique_key="autosave", debounce=5)
        await trio.sleep(6)
        pool.mark_producer_finished()
    assert [job_id for job_id, _ in ran] == ["save-3", "save-4"]
    snap = await backend.stats()
    assert snap.cancelled == 3
    await assert_conserved(backend)


async def test_a_debounced_job_already_running_is_not_replaced(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    running = trio.Event()
    finish = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        running.set()
        await finish.wait()

    async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.5) as pool:
        await queue.enqueue(1, id="d-1", unique_key="d", debounce=2)
        await running.wait()
        found = await queue.enqueue(2, id="d-2", unique_key="d", debounce=2)
        assert (found.id, found.deduplicated) == ("d-1", True)
        assert await state_of(queue, "d-1") is JobState.PROCESSING
        finish.set()
        pool.mark_producer_finished()
    assert await state_of(queue, "d-2") is None
    await assert_conserved(backend)


async def test_a_debounced_job_that_became_ready_is_not_replaced(make_backend, autojump_clock):
    """Debounce replaces a job still waiting out its delay; once the delay is over the
    job is ready to run, and a newer job of its key finds it instead."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(0, id="other")
    await queue.enqueue(1, id="d-1", unique_key="d", debounce=2)
    await trio.sleep(3)
    # a claim moves what came due to the ready queue (and takes the job ready before)
    [claim] = await backend.claim(1, lease=60, block=0)
    assert claim.job.id == "other"
    assert await state_of(queue, "d-1") is JobState.RECEIVED
    found = await queue.enqueue(2, id="d-2", unique_key="d", debounce=2)
    assert (found.id, found.deduplicated) == ("d-1", True), (
        "a debounced enqueue replaced a job that was ready to run"
    )
    assert await state_of(queue, "d-1") is JobState.RECEIVED
    assert await state_of(queue, "d-2") is None
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_plain_job_with_a_key_is_never_replaced_by_a_debounced_one(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="plain", unique_key="x", delay=30)  # scheduled, not debounced
    found = await queue.enqueue(2, id="bouncy", unique_key="x", debounce=5)
    assert (found.id, found.deduplicated, found.scheduled) == ("plain", True, True)
    assert await state_of(queue, "plain") is JobState.SCHEDULED
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_one_batch_with_one_key_adds_its_first_job(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    results = await queue.enqueue_many([1, 2, 3], ids=["b1", "b2", "b3"], unique_key="batch")
    assert [(r.id, r.deduplicated) for r in results if isinstance(r, Receipt)] == [
        ("b1", False),
        ("b1", True),
        ("b1", True),
    ]
    bounced = await queue.enqueue_many([4, 5], ids=["c1", "c2"], unique_key="c", debounce=3)
    assert [r.id for r in bounced if isinstance(r, Receipt)] == ["c1", "c2"]
    assert await state_of(queue, "c1") is JobState.CANCELLED
    assert await backend.pending() == 2
    await assert_conserved(backend)
