"""submit() never blocks; the sweeper schedules stored jobs and recovers expired claims."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trioqueue
from trioqueue import JobState, Queue, Retention

from ..conftest import collect, settle


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_submit_stores_jobs_beyond_capacity_unqueued(make_backend, autojump_clock):
    backend = await make_backend(capacity=2)
    queue = Queue(backend)
    receipts = [await queue.submit(i, id=str(i)) for i in range(5)]
    assert [r.queued for r in receipts] == [True, True, False, False, False]
    record = await queue.status("4")
    assert record is not None
    assert (record.state, record.queued) == (JobState.RECEIVED, False)
    gauges = (await queue.stats()).gauges
    assert (gauges.queue_depth, gauges.backlog) == (2, 5)

    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen), workers=1):
        pass
    assert [job.id for job in seen] == [str(i) for i in range(5)]  # accepted order kept
    assert (await queue.stats()).conserved


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_stored_jobs_are_scheduled_before_waiting_producers(make_backend, nursery):
    backend = await make_backend(capacity=1)
    queue = Queue(backend)
    await queue.enqueue("a", id="a")
    nursery.start_soon(queue.enqueue, "b")  # waits for room
    await settle()
    await queue.submit("s", id="s")  # stored unqueued, but accepted before "b"
    order = []
    for _ in range(3):
        [claim] = await backend.claim(1, lease=30, block=1)
        order.append(claim.job.payload)
        await settle()
        await backend.ack(claim)
    assert order == ["a", "s", "b"]


async def test_the_sweeper_recovers_a_claim_whose_lease_ran_out(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="j")
    [abandoned] = await backend.claim(1, lease=5, block=1)  # an owner that went away
    await trio.sleep(4)
    assert (await backend.sweep()).recovered == 0  # lease still valid
    await trio.sleep(2)
    if not make_backend.redelivers:  # at most once: kept as a dead letter, not run again
        assert (await backend.sweep()).recovered == 0
        [dead] = await backend.dead_letters()
        assert (dead.id, dead.state) == ("j", JobState.FAILED)
        assert "never runs a job twice" in (dead.reason or "")
        assert await backend.claim(1, lease=5, block=0) == []
        assert not await backend.ack(abandoned)  # a late owner changes nothing
        snap = await backend.stats()
        assert (snap.recovered, snap.dead_lettered, snap.succeeded) == (0, 1, 0)
        assert snap.conserved
        return
    assert (await backend.sweep()).recovered == 1
    record = await queue.status("j")
    assert record is not None
    assert (record.state, record.queued, record.attempts) == (JobState.RECEIVED, True, 0)

    [fresh] = await backend.claim(1, lease=5, block=1)
    assert fresh.token != abandoned.token
    # the stale owner is fenced out (a late *success* is the one exception: see below)
    assert not await backend.drop(abandoned, "too late")
    record = await queue.status("j")
    assert record is not None
    assert record.state is JobState.PROCESSING  # the new owner's claim is intact
    assert await backend.ack(fresh)
    snap = await backend.stats()
    assert (snap.recovered, snap.stale, snap.succeeded) == (1, 1, 1)


async def test_renewed_claims_are_not_recovered(make_backend, autojump_clock):
    backend = await make_backend()
    await Queue(backend).enqueue("p")
    claims = await backend.claim(1, lease=5, block=1)
    for _ in range(10):
        await trio.sleep(4)
        assert await backend.renew(claims, lease=5) == trioqueue.Renewal()  # none lost
        assert (await backend.sweep()).recovered == 0


async def test_a_renewal_names_the_claims_no_longer_held_and_extends_only_the_others(
    make_backend, autojump_clock
):
    backend = await make_backend()
    await Queue(backend).enqueue("lapses", id="lapses")
    [lapsed] = await backend.claim(1, lease=2, block=1)
    await Queue(backend).enqueue("other", id="other")
    await trio.sleep(3)
    await backend.sweep()  # the first claim's lease ran out: it is no longer held
    [held] = await backend.claim(1, lease=2, block=1)  # a claim of its own, whichever job
    await Queue(backend).enqueue("done", id="done")
    [done] = await backend.claim(1, lease=2, block=1)
    assert await backend.ack(done)
    renewal = await backend.renew([lapsed, held, done], lease=5)
    assert renewal == trioqueue.Renewal(lost=frozenset({lapsed.token, done.token}))
    await trio.sleep(3)  # past the old lease of the held claim, within its renewed one
    assert (await backend.sweep()).recovered == 0


async def test_a_pool_recovers_an_abandoned_claim_and_runs_it(make_backend, autojump_clock):
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    await backend.claim(1, lease=3, block=1)  # claimed by someone who never comes back
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen), sweep_interval=1) as pool:
        pool.mark_producer_finished()
    # within the lease plus one sweep; on Redis under the mock clock, plus one claim
    # window: a BLMOVE reply later than the autojump threshold (a loaded machine) lets
    # the clock jump to that wait's deadline, and the next claim takes the job
    assert trio.current_time() <= 3 + 1 + (0 if make_backend.kind == "memory" else 1.5)
    if not make_backend.redelivers:  # at most once: never run, kept as a dead letter
        assert seen == []
        assert [dead.id for dead in await backend.dead_letters()] == ["j"]
        return
    assert [job.id for job in seen] == ["j"]
    assert (await backend.stats()).recovered == 1


async def test_a_long_handler_keeps_its_claim_by_renewing_it(make_backend, autojump_clock):
    backend = await make_backend()
    runs: list[str] = []

    async def slow(job: trioqueue.Job) -> None:
        runs.append(job.id)
        await trio.sleep(50)  # ten leases long

    async with trioqueue.open_worker_pool(backend, slow, lease=5, sweep_interval=1):
        await Queue(backend).enqueue("p", id="j")
    assert runs == ["j"]
    assert (await backend.stats()).recovered == 0


@pytest.mark.server_clock
async def test_retention_keeps_the_newest_finished_records(make_backend, autojump_clock):
    backend = await make_backend(retention=3)
    queue = Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        if job.payload == "dead":
            raise RuntimeError("always")

    retry = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, handler, workers=1, retry=retry):
        await queue.enqueue("dead", id="dead")
        for i in range(6):
            await queue.enqueue(i, id=str(i))
    kept = [i for i in range(6) if await queue.status(str(i)) is not None]
    assert kept == [3, 4, 5]
    assert [r.id for r in await queue.dead_letters()] == ["dead"]  # dead letters stay


async def test_retention_by_age_is_applied_by_the_sweep(make_backend, autojump_clock):
    backend = await make_backend(retention=Retention(max_count=None, max_age=60))
    queue = Queue(backend)
    async with trioqueue.open_worker_pool(backend, collect([])):
        await queue.enqueue("old", id="old")
    await trio.sleep(30)
    async with trioqueue.open_worker_pool(backend, collect([])):
        await queue.enqueue("new", id="new")
    await trio.sleep(31)
    report = await backend.sweep()
    assert report.evicted == 1
    assert await queue.status("old") is None
    assert await queue.status("new") is not None


@pytest.mark.server_clock
async def test_a_job_given_back_or_recovered_is_next_in_line(make_backend, autojump_clock):
    """A job interrupted by a release or a crash was taken in its turn: it goes first."""
    backend = await make_backend()
    for name in "abcde":
        await Queue(backend).enqueue(name, id=name)
    [first] = await backend.claim(1, lease=5, block=0)
    assert await backend.release([first]) == 1  # a pool stopping
    [again] = await backend.claim(1, lease=5, block=0)
    assert again.job.id == "a"  # taken in its turn already: it does not queue again
    await trio.sleep(1)
    [later] = await backend.claim(1, lease=5, block=0)  # "b", its lease a second later
    for _ in range(6):  # their owner went away; the queue is live: sweeps go on
        await trio.sleep(1)
        await backend.sweep()
    rest = await backend.claim(5, lease=5, block=0)
    assert later.job.id == "b"
    if make_backend.redelivers:  # each back at the front when it was recovered: b after a
        assert [claim.job.id for claim in rest] == ["b", "a", "c", "d", "e"]
    else:  # at most once: they started, so they never run again; the others keep their order
        assert [claim.job.id for claim in rest] == ["c", "d", "e"]
        assert [dead.id for dead in await backend.dead_letters()] == ["a", "b"]


@pytest.mark.parametrize("second_run", ["running", "waiting to retry", "finished"])
async def test_a_late_success_is_kept_when_no_other_run_has_finished(
    make_backend, autojump_clock, second_run
):
    """A run that outlived its lease (a blocked event loop) and then succeeded completes
    the job, once: the run that took the job over is refused its outcome."""
    backend = await make_backend()
    await Queue(backend).enqueue("p", id="j")
    [late] = await backend.claim(1, lease=5, block=0)
    for _ in range(6):  # the queue is live (sweeps go on); the owner does not renew
        await trio.sleep(1)
        await backend.sweep()
    if not make_backend.redelivers:  # at most once: it became a dead letter, not a retry
        assert not await backend.ack(late)
        assert [dead.id for dead in await backend.dead_letters()] == ["j"]
        return
    [other] = await backend.claim(1, lease=5, block=0)  # the job runs again elsewhere
    if second_run == "finished":  # the job is done: the late success changes nothing
        assert await backend.ack(other)
        assert not await backend.ack(late)
        assert (await backend.stats()).succeeded == 1
        return
    if second_run == "waiting to retry":
        assert await backend.retry_later(other, None)
    assert await backend.ack(late)  # the late success is kept
    assert not await backend.ack(other)  # the other run's outcome is refused
    assert not await backend.requeue(other)
    record = await backend.status("j")
    assert record is not None
    assert record.state is JobState.COMPLETED
    snap = await backend.stats()
    assert (snap.succeeded, snap.gauges.held, snap.gauges.retry_waiting) == (1, 0, 0)
    assert snap.conserved
    assert await backend.claim(1, lease=5, block=0) == []  # nothing left to run


@pytest.mark.parametrize("start_again", ["requeued", "purged and enqueued again"])
async def test_a_late_success_from_an_earlier_life_is_refused(
    make_backend, autojump_clock, start_again
):
    """A job dead-lettered and requeued (or purged and enqueued anew) starts a new life: a
    late success of a run from before, however late, does not complete the new one.

    Found by the conservation machine on Redis: an ack held up 20 s behind a cut
    link completed a requeued job whose own first attempt had just timed out."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="j")
    [late] = await backend.claim(1, lease=5, block=0)
    for _ in range(6):  # the owner does not renew: its claim is recovered
        await trio.sleep(1)
        await backend.sweep()
    if make_backend.redelivers:  # (at most once, the sweep dead-lettered it)
        [other] = await backend.claim(1, lease=5, block=0)
        assert await backend.dead_letter(other, None, "given up")
    if start_again == "requeued":
        await queue.requeue_dead("j")
    else:
        assert await queue.purge_dead("j") == 1
        await queue.enqueue("p", id="j")
    [new] = await backend.claim(1, lease=5, block=0)  # the new life's first attempt
    assert await backend.retry_later(new, None)
    assert not await backend.ack(late)  # from the earlier life: refused
    record = await backend.status("j")
    assert record is not None
    assert (record.state, record.attempts) == (JobState.FAILED_RETRY, 1)
    assert await backend.requeue(new)  # the new life goes on
    [again] = await backend.claim(1, lease=5, block=0)
    assert await backend.ack(again)
    snap = await backend.stats()
    assert (snap.succeeded, snap.stale) == (1, 1)
    assert snap.conserved
