"""Delayed jobs: stored until due, never claimable before, ready in due order.

A stream source cannot hold a job until a due time (``XADD`` has none): these run
on every backend but ``redis-stream``, where enqueueing with a delay is refused
(tests/test_redis_streams.py).
"""

from __future__ import annotations

import datetime

import pytest
import trio

import trioqueue
from trioqueue import IdempotencyConflict, JobState, Queue

from ..conftest import settle

pytestmark = pytest.mark.not_on_stream


async def test_a_delayed_job_is_stored_until_due_and_not_claimable_before(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    receipt = await queue.enqueue({"to": "a"}, id="later", delay=10)
    assert (receipt.deduplicated, receipt.queued, receipt.scheduled) == (False, False, True)
    record = await queue.status("later")
    assert record is not None
    assert (record.state, record.queued) == (JobState.SCHEDULED, False)
    assert record.due_at == pytest.approx(record.created_at + 10, abs=0.05)
    snap = await queue.stats()
    assert (snap.gauges.scheduled, snap.gauges.queue_depth, snap.gauges.backlog) == (1, 0, 0)
    assert await backend.pending() == 1
    assert snap.conserved

    assert await backend.claim(1, lease=30, block=0) == []
    await trio.sleep(9.5)
    assert await backend.claim(1, lease=30, block=0) == []
    await trio.sleep(0.6)
    [claim] = await backend.claim(1, lease=30, block=0)
    assert (claim.job.id, claim.job.payload, claim.job.attempt) == ("later", {"to": "a"}, 1)
    assert await backend.ack(claim)
    record = await queue.status("later")
    assert record is not None
    assert (record.state, record.due_at) == (JobState.COMPLETED, None)
    snap = await queue.stats()
    assert (snap.gauges.scheduled, snap.succeeded) == (0, 1)
    assert snap.conserved


async def test_delayed_jobs_start_in_due_order_at_their_due_time(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    started: dict[str, float] = {}

    async def handler(job: trioqueue.Job) -> None:
        started[job.id] = trio.current_time()

    begin = trio.current_time()
    delays = {"e": 5.0, "a": 1.0, "c": 3.0, "b": 2.0, "d": 4.0}
    async with trioqueue.open_worker_pool(backend, handler, workers=2):
        for job_id, delay in delays.items():
            await queue.enqueue(job_id, id=job_id, delay=delay)
    assert sorted(started, key=started.__getitem__) == ["a", "b", "c", "d", "e"]
    for job_id, delay in delays.items():
        late = started[job_id] - (begin + delay)
        assert 0 <= late < 0.5, (job_id, late)  # never early; on time up to the clock's jumps
    assert (await queue.stats()).conserved


async def test_a_waiting_claim_wakes_when_a_job_enqueued_meanwhile_comes_due(
    make_backend, autojump_clock, nursery
):
    backend = await make_backend()
    queue = Queue(backend)
    got: list[trioqueue.Claim] = []
    done = trio.Event()

    async def wait_long() -> None:
        got.extend(await backend.claim(1, lease=30, block=60))
        done.set()

    begin = trio.current_time()
    nursery.start_soon(wait_long)
    await settle()  # the claim waits (in BLMOVE on Redis) with nothing ready nor stored
    await queue.enqueue("soon", id="soon", delay=5)
    await done.wait()
    [claim] = got
    assert claim.job.id == "soon"
    assert 5 <= trio.current_time() - begin < 5.5  # at its due time, not at the block's end


async def test_delayed_jobs_take_no_room_and_a_due_job_waits_for_room(make_backend, autojump_clock):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue("first", id="first")  # the ready queue is full
    begin = trio.current_time()
    receipt = await queue.try_enqueue("later", id="later", delay=1)  # not refused: no room taken
    assert receipt.scheduled
    await trio.sleep(2)  # due, but the queue is still full: it waits, stored
    assert (await backend.sweep()).due == 0
    snap = await queue.stats()
    assert (snap.gauges.queue_depth, snap.gauges.scheduled) == (1, 1)
    record = await queue.status("later")
    assert record is not None
    assert record.state is JobState.SCHEDULED
    assert snap.conserved

    [claim] = await backend.claim(1, lease=30, block=0)
    assert claim.job.id == "first"
    assert await backend.ack(claim)
    [claim] = await backend.claim(1, lease=30, block=0)  # room again: the due job is next
    assert claim.job.id == "later"
    assert claim.ready_at == pytest.approx(begin + 1, abs=0.1)  # its wait counts from its due
    assert await backend.ack(claim)
    snap = await queue.stats()
    assert (snap.gauges.scheduled, snap.succeeded) == (0, 2)
    assert snap.conserved


async def test_the_sweep_moves_due_jobs_to_the_ready_queue(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    for n in range(3):
        await queue.enqueue(n, id=f"d{n}", delay=1 + n)
    await trio.sleep(2.5)
    assert (await backend.sweep()).due == 2
    snap = await queue.stats()
    assert (snap.gauges.queue_depth, snap.gauges.scheduled) == (2, 1)
    for job_id in ("d0", "d1"):
        record = await queue.status(job_id)
        assert record is not None
        assert (record.state, record.queued, record.due_at) == (JobState.RECEIVED, True, None)
    assert snap.conserved


@pytest.mark.server_clock
async def test_idempotency_ignores_the_due_time_and_the_first_stands(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue({"n": 1}, id="j", delay=10)
    first = await queue.status("j")
    again = await queue.enqueue({"n": 1}, id="j", delay=20)  # a retried call, say
    assert (again.deduplicated, again.scheduled) == (True, True)
    record = await queue.status("j")
    assert record is not None
    assert first is not None
    assert record.due_at == first.due_at
    with pytest.raises(IdempotencyConflict):
        await queue.enqueue({"n": 2}, id="j", delay=10)
    now = await queue.enqueue({"n": 1}, id="j")  # without a delay: still the same job
    assert (now.deduplicated, now.scheduled) == (True, True)
    snap = await queue.stats()
    assert (snap.enqueued, snap.deduplicated, snap.conflicts) == (1, 2, 1)


@pytest.mark.server_clock
async def test_at_takes_an_aware_datetime_and_a_past_or_zero_due_is_at_once(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    assert (await queue.enqueue("at", id="at", at=soon)).scheduled
    record = await queue.status("at")
    assert record is not None
    assert record.due_at == pytest.approx(record.created_at + 30, abs=1.0)

    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    for job_id, options in (
        ("past", {"at": past}),
        ("zero", {"delay": 0}),
        ("timedelta", {"delay": datetime.timedelta(0)}),
    ):
        receipt = await queue.enqueue(job_id, id=job_id, **options)
        assert (receipt.queued, receipt.scheduled) == (True, False), job_id
    later = await queue.submit("td", id="td", delay=datetime.timedelta(minutes=2))
    assert later.scheduled
    td = await queue.status("td")
    assert td is not None
    assert td.due_at == pytest.approx(td.created_at + 120, abs=0.05)


async def test_a_batch_may_be_due_later_together(make_backend, autojump_clock):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    # three jobs into room for two: due later, they take none, so nothing waits
    results = await queue.enqueue_many(["a", "b", "c"], ids=["a", "b", "c"], delay=10)
    assert [r.scheduled for r in results] == [True, True, True]  # type: ignore[union-attr]
    assert (await queue.stats()).gauges.scheduled == 3
    assert await backend.claim(3, lease=30, block=0) == []
    await trio.sleep(10.1)
    claims = await backend.claim(3, lease=30, block=0)  # the ready queue holds two
    assert sorted(c.job.id for c in claims) == ["a", "b"]
    for claim in claims:
        assert await backend.ack(claim)
    [last] = await backend.claim(3, lease=30, block=0)  # the third moved into the room
    assert last.job.id == "c"
    assert await backend.ack(last)
    assert (await queue.stats()).conserved
    with pytest.raises(TypeError, match="not both"):
        await queue.submit_many([1], delay=1, at=datetime.datetime.now(datetime.UTC))


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"delay": -1}, ValueError, "seconds >= 0"),
        ({"delay": float("nan")}, ValueError, "finite"),
        ({"delay": "5"}, TypeError, "not str"),
        ({"delay": True}, TypeError, "not bool"),
        ({"at": datetime.datetime(2030, 1, 1)}, ValueError, "no time zone"),
        # a due time nobody means, and past year 9999 none a record could show
        ({"delay": 1e308}, ValueError, "more than 100 years"),
        ({"delay": datetime.timedelta(days=101 * 366)}, ValueError, "more than 100 years"),
        (
            {"at": datetime.datetime(9999, 1, 1, tzinfo=datetime.UTC)},
            ValueError,
            "more than 100 years",
        ),
        ({"at": 1700000000}, TypeError, "datetime"),
        (
            {"delay": 1, "at": datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)},
            TypeError,
            "not both",
        ),
    ],
)
@pytest.mark.server_clock
async def test_a_bad_delay_or_due_time_is_refused_and_nothing_is_stored(
    make_backend, options, error, words
):
    backend = await make_backend()
    queue = Queue(backend)
    with pytest.raises(error, match=words):
        await queue.enqueue("x", id="x", **options)
    assert await queue.status("x") is None
    assert await backend.pending() == 0
