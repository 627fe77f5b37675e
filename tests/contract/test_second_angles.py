"""Second angles on guarantees the suite checked once: each fails a bug the first let through.

Batch renewal, the handler timeout, and where a job a shutdown gave back goes.
"""

from __future__ import annotations

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, RetryPolicy

from ..conftest import collect


def count_claim_batches(backend: trioqueue.Backend) -> list[int]:
    """Wrap *backend*'s claim; the returned list gets the size of every batch it hands out."""
    sizes: list[int] = []
    claim = backend.claim

    async def counted(max_jobs: int, *, lease: float, block: float) -> list[trioqueue.Claim]:
        claims = await claim(max_jobs, lease=lease, block=block)
        sizes.append(len(claims))
        return claims

    backend.claim = counted  # type: ignore[method-assign]
    return sizes


async def test_every_claim_of_a_batch_keeps_its_lease_while_its_handler_runs(
    make_backend, autojump_clock
):
    backend = await make_backend()
    ids = [str(i) for i in range(4)]
    for job_id in ids:
        await Queue(backend).enqueue(job_id, id=job_id)
    batches = count_claim_batches(backend)
    runs: list[str] = []

    async def slow(job: trioqueue.Job) -> None:
        runs.append(job.id)
        await trio.sleep(10)  # more than three leases

    with trio.fail_after(60):  # on the mock clock: endless redeliveries fail, not hang
        async with trioqueue.open_worker_pool(
            backend, slow, workers=4, batch_size=4, lease=3, sweep_interval=1
        ):
            pass
    if make_backend.kind != "memory":  # a pool in the memory backend's process claims
        assert batches[0] == 4  # one job per free worker (_pool/_inline.py); else one batch
    assert sorted(runs) == ids  # each ran once
    snap = await backend.stats()
    assert (snap.recovered, snap.dead_lettered, snap.stale, snap.succeeded) == (0, 0, 0, 4)


async def test_a_handler_that_never_returns_is_cut_off_at_handler_timeout_each_attempt(
    make_backend, autojump_clock
):
    backend = await make_backend()
    spans: list[float] = []

    both_cut_off = trio.Event()

    async def endless(job: trioqueue.Job) -> None:
        started = trio.current_time()
        try:
            await trio.sleep_forever()
        finally:
            spans.append(trio.current_time() - started)
            if len(spans) == 2:
                both_cut_off.set()

    retry = RetryPolicy(max_attempts=2, base_delay=1, max_delay=1)
    with trio.fail_after(30):  # on the mock clock: an ignored timeout fails, it does not hang
        async with trioqueue.open_worker_pool(
            backend, endless, workers=1, handler_timeout=5, retry=retry
        ):
            await Queue(backend).enqueue("p", id="j")
            await both_cut_off.wait()  # the producer stays on: the pool polls at its pace
    assert spans == [pytest.approx(5), pytest.approx(5)]  # on the mock clock: cut off on time
    [dead] = await backend.dead_letters()
    assert (dead.id, dead.state, dead.attempts) == ("j", JobState.FAILED, 2)
    assert dead.last_error is not None
    assert dead.last_error.type == "TimeoutError"
    snap = await backend.stats()
    assert (snap.failed, snap.retries, snap.dead_lettered, snap.succeeded) == (2, 1, 1, 0)


async def test_a_job_a_shutdown_gave_back_unstarted_runs_before_the_jobs_queued_after_it(
    make_backend, autojump_clock
):
    backend = await make_backend()
    queue = Queue(backend)
    for name in "abcd":
        await queue.enqueue(name, id=name)

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(2)

    # one worker runs "a"; "b" waits in the prefetch buffer and is given back unstarted
    # (a pool in the memory backend's process prefetches nothing: _pool/_inline.py)
    async with trioqueue.open_worker_pool(backend, slow, workers=1, prefetch=1) as pool:
        await trio.sleep(1)
        report = await pool.shutdown(grace=5)
    released = 0 if make_backend.kind == "memory" else 1
    assert report == trioqueue.ShutdownReport(finished=1, cancelled=0, released=released)
    await queue.enqueue("e", id="e")
    seen: list[trioqueue.Job] = []
    async with trioqueue.open_worker_pool(backend, collect(seen), workers=1):
        pass
    assert [job.id for job in seen] == ["b", "c", "d", "e"]  # taken in its turn already
    assert seen[0].attempt == 1  # never started: no attempt counted
