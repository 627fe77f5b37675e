"""Jobs that run after others: chains, fan-in, and what a parent that fails does to them.

A stream source refuses ``after=`` (every group reads an entry at once:
``test_redis_streams.py``), so these tests skip it.
"""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import CancelResult, DependencyNotFound, JobState, Queue, RetryPolicy

pytestmark = pytest.mark.not_on_stream

NO_RETRY = RetryPolicy(max_attempts=1)


async def assert_conserved(backend: trioqueue.Backend) -> None:
    snap = await backend.stats()
    assert snap.conserved, snap


async def state_of(queue: Queue, job_id: str) -> JobState:
    record = await queue.status(job_id)
    assert record is not None, job_id
    return record.state


DEADLINE = 600.0  # seconds on the mock clock: far beyond what any test here runs for


async def run_until_done(backend: trioqueue.Backend, handler: trioqueue.Handler) -> None:
    """Run a pool until every job the backend holds is finished.

    Fails, saying what was left, if that takes longer than `DEADLINE`: a follower
    whose parents all finished must have run or become a dead letter by then.
    """
    with trio.move_on_after(DEADLINE) as waited:
        async with trioqueue.open_worker_pool(
            backend, handler, workers=4, retry=NO_RETRY, poll_interval=0.5
        ) as pool:
            pool.mark_producer_finished()
            await pool.wait_stopped()
    if waited.cancelled_caught:
        gauges = (await backend.stats()).gauges
        pytest.fail(
            f"jobs left unfinished {DEADLINE:g} s on ({gauges}): a job whose parents all "
            "finished must run, or become a dead letter when one did not complete"
        )


@pytest.mark.server_clock
async def test_a_follower_enqueued_while_its_parent_runs_waits_for_it_to_finish(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="parent")
    [parent] = await backend.claim(1, lease=60, block=0)  # the parent runs
    receipt = await queue.enqueue("f", id="follower", after=["parent"])
    assert receipt.deferred
    assert await state_of(queue, "follower") is JobState.DEFERRED
    assert await backend.claim(1, lease=60, block=0) == [], (
        "a follower was ready to start while its parent was still running"
    )
    assert await backend.ack(parent)
    [follower] = await backend.claim(1, lease=60, block=0)
    assert follower.job.id == "follower"
    await assert_conserved(backend)


async def test_a_chain_runs_each_job_after_the_one_before_completes(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    events: list[str] = []

    async def handler(job: trioqueue.Job) -> str:
        events.append(f"start {job.id}")
        await trio.sleep(1)  # four workers: the next would overlap if it were ready
        events.append(f"end {job.id}")
        return job.payload

    receipts = await queue.enqueue_chain(["x", "y", "z"], ids=["a", "b", "c"])
    assert [(r.id, r.deferred, r.queued) for r in receipts] == [  # type: ignore[union-attr]
        ("a", False, True),
        ("b", True, False),
        ("c", True, False),
    ]
    assert [await state_of(queue, i) for i in "abc"] == [
        JobState.RECEIVED,
        JobState.DEFERRED,
        JobState.DEFERRED,
    ]
    assert await queue.job_ids("deferred") == ["b", "c"]
    assert await backend.pending() == 3
    snap = await backend.stats()
    assert (snap.gauges.deferred, snap.gauges.queue_depth) == (2, 1)
    await run_until_done(backend, handler)
    assert events == ["start a", "end a", "start b", "end b", "start c", "end c"]
    record = await queue.status("c")
    assert record is not None
    assert (record.state, record.after, record.result) == (JobState.COMPLETED, ("b",), "z")
    await assert_conserved(backend)


async def test_a_job_after_a_group_runs_once_the_whole_group_completed(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    done: list[str] = []

    async def handler(job: trioqueue.Job) -> object:
        if isinstance(job.payload, int):
            await trio.sleep(job.payload)
        done.append(job.id)
        return job.payload

    group = await queue.enqueue_many([3, 1, 2], ids=["g1", "g2", "g3"])
    receipts = [r for r in group if isinstance(r, trioqueue.Receipt)]
    summary = await queue.enqueue("sum", id="total", after=receipts)  # Receipts or ids
    assert summary.deferred
    assert not summary.queued
    await run_until_done(backend, handler)
    assert done[-1] == "total"
    assert sorted(done[:3]) == ["g1", "g2", "g3"]
    async with queue.results(["g1", "g2", "g3"]) as results:  # the group's, awaited together
        values = {job_id: outcome.unwrap() async for job_id, outcome in results}
    assert values == {"g1": 3, "g2": 1, "g3": 2}
    await assert_conserved(backend)


@pytest.mark.parametrize(
    ("ending", "how"),
    [
        ("fail", "failed (it is a dead letter)"),
        ("drop", "was dropped"),
    ],
)
@pytest.mark.server_clock
async def test_a_parent_that_does_not_complete_makes_its_followers_dead_letters(
    make_backend, autojump_clock, ending, how
):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)
        if job.id == "parent":
            if ending == "drop":
                raise trioqueue.Drop("not wanted")
            raise RuntimeError("broken")

    await queue.enqueue(1, id="parent")
    await queue.enqueue(2, id="child", after=["parent"])
    await queue.enqueue(3, id="grandchild", after=["child"])
    await queue.enqueue(4, id="bystander")
    await run_until_done(backend, handler)
    assert sorted(ran) == ["bystander", "parent"]
    child, grandchild = await queue.status("child"), await queue.status("grandchild")
    assert child is not None
    assert grandchild is not None
    assert (child.state, grandchild.state) == (JobState.FAILED, JobState.FAILED)
    assert child.reason == (
        f"it was to run after job 'parent', which {how}; requeue it to run it all the same"
    )
    assert grandchild.reason == (
        "it was to run after job 'child', which never ran either; requeue it to run it all the same"
    )
    assert child.attempts == 0
    dead = {record.id for record in await queue.dead_letters()}
    assert {"child", "grandchild"} <= dead
    snap = await backend.stats()
    assert snap.gauges.deferred == 0
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_cancelled_parent_ends_its_followers_and_a_cancelled_follower_stays_so(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(1, id="p1")
    await queue.enqueue(2, id="p2")
    await queue.enqueue(3, id="after-p1", after=["p1"])
    await queue.enqueue(4, id="after-p2", after=["p2"])
    assert await queue.cancel("p1") is CancelResult.CANCELLED
    record = await queue.status("after-p1")
    assert record is not None
    assert record.state is JobState.FAILED
    assert record.reason is not None
    assert "'p1', which was cancelled" in record.reason
    # a deferred job is cancelled at once, and its parent's completion leaves it so
    assert await queue.cancel("after-p2") is CancelResult.CANCELLED
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    await run_until_done(backend, handler)
    assert ran == ["p2"]
    assert await state_of(queue, "after-p2") is JobState.CANCELLED
    assert await queue.job_ids("deferred") == []
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_parent_finished_already_counts_at_once(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        if job.id == "bad":
            raise RuntimeError("broken")

    await queue.enqueue_many([1, 2], ids=["good", "bad"])
    await run_until_done(backend, handler)
    ready = await queue.enqueue(3, id="after-good", after=["good"])
    assert (ready.deferred, ready.queued, ready.state) == (False, True, JobState.RECEIVED)
    assert await state_of(queue, "after-good") is JobState.RECEIVED
    # one parent failed: the job never runs, whatever the others do; its receipt says so
    doomed = await queue.enqueue(4, id="after-both", after=["good", "bad"])
    assert (doomed.deferred, doomed.queued, doomed.state) == (False, False, JobState.FAILED)
    again = await queue.enqueue(4, id="after-both", after=["good", "bad"])
    assert (again.deduplicated, again.state) == (True, JobState.FAILED)
    record = await queue.status("after-both")
    assert record is not None
    assert record.state is JobState.FAILED
    assert record.reason is not None
    assert "'bad', which failed" in record.reason
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_an_unknown_parent_is_refused_and_nothing_is_accepted(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    with pytest.raises(DependencyNotFound, match="no job 'ghost'") as refused:
        await queue.enqueue(1, id="orphan", after=["ghost"])
    assert (refused.value.job_id, refused.value.child) == ("ghost", "orphan")
    assert await queue.status("orphan") is None
    await queue.enqueue(0, id="known")
    results = await queue.enqueue_many([1, 2], ids=["lost", "kept"], after=["known"])
    assert all(isinstance(r, trioqueue.Receipt) and r.deferred for r in results)
    results = await queue.enqueue_many([3, 4], ids=["x", "y"], after=["ghost"])
    assert all(isinstance(r, DependencyNotFound) for r in results)
    assert await backend.pending() == 3
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_deferred_job_takes_no_room_and_waits_for_room_once_ready(
    make_backend, autojump_clock
):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue(1, id="parent")  # the queue is full now
    for n in range(3):  # never QueueFull: a deferred job takes no room
        receipt = await queue.try_enqueue(n, id=f"f{n}", after=["parent"])
        assert receipt.deferred
    again = await queue.try_enqueue(0, id="f0", after=["parent"])
    assert again.deduplicated
    assert again.deferred
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)

    await run_until_done(backend, handler)
    assert ran[0] == "parent"
    assert sorted(ran[1:]) == ["f0", "f1", "f2"]
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_follower_requeued_from_the_dead_letters_runs(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    ran: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        ran.append(job.id)
        if job.id == "parent" and job.attempt == 1 and ran.count("parent") == 1:
            raise RuntimeError("broken once")

    await queue.enqueue_chain([1, 2], ids=["parent", "child"])
    await run_until_done(backend, handler)
    assert ran == ["parent"]
    await queue.requeue_dead("parent")
    await queue.requeue_dead("child")
    await run_until_done(backend, handler)
    assert sorted(ran) == ["child", "parent", "parent"]
    assert await state_of(queue, "child") is JobState.COMPLETED
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_a_newer_job_of_a_followers_id_waits_only_for_its_own_parents(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    for job_id in ("P", "G", "Q"):
        await queue.enqueue(job_id, id=job_id)
    await queue.enqueue("f", id="F", after=["P", "G"])
    await queue.cancel("G")  # F becomes a dead letter; P still lists it
    assert await state_of(queue, "F") is JobState.FAILED
    assert await queue.purge_dead("F") == 1
    await queue.enqueue("f again", id="F", after=["Q"])  # a new job of that id
    claims = {c.job.id: c for c in await backend.claim(2, lease=30, block=0)}
    assert set(claims) == {"P", "Q"}
    assert await backend.ack(claims["P"])  # P's completion is nothing to the new F
    assert await state_of(queue, "F") is JobState.DEFERRED
    assert await backend.ack(claims["Q"])
    assert await state_of(queue, "F") is JobState.RECEIVED
    await assert_conserved(backend)


@pytest.mark.server_clock
async def test_followers_wait_and_go_on_in_the_order_they_came(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="P")
    await queue.enqueue_many(["z", "a", "m"], ids=["z", "a", "m"], after=["P"])
    await queue.enqueue("b", id="b", after=["P"])
    assert await queue.job_ids("deferred") == ["z", "a", "m", "b"]
    [claim] = await backend.claim(1, lease=30, block=0)
    assert await backend.ack(claim)
    assert await queue.job_ids("ready") == ["z", "a", "m", "b"]


@pytest.mark.server_clock
async def test_a_failed_parents_followers_end_depth_first_in_the_order_they_came(
    make_backend, autojump_clock
):
    """A follower's own followers end before its next sibling does, on every backend
    (Redis fails a long chain in slices, in this same order)."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue(0, id="root", max_attempts=1)
    await queue.enqueue(1, id="a", after=["root"])
    await queue.enqueue(2, id="b", after=["root"])
    await queue.enqueue(3, id="a1", after=["a"])
    await queue.enqueue(4, id="b1", after=["b"])

    async def handler(job: trioqueue.Job) -> None:
        raise RuntimeError("the root fails")

    await run_until_done(backend, handler)
    dead = [record.id for record in await queue.dead_letters()]
    assert dead == ["root", "a", "a1", "b", "b1"]
    await assert_conserved(backend)
