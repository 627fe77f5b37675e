"""An outage of the backend never by itself makes a live pool's jobs run again.

Two pools share a queue, each behind the same fake outage (their calls fail in
one window of Trio's clock: the backend is down for everyone), while their
handlers run through it. However long the outage (half a lease to five
leases), every job runs exactly once and completes: the pools keep their claims
and retry their outcomes until the backend is back; the backend gives expired
claims one more lease after a silence, so their owners renew before anyone
recovers them. The claims of a worker that died before the outage are still
recovered afterwards and run once.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue import Queue

from ..fake_outage import Outages

if TYPE_CHECKING:
    from ..conftest import MakeBackend

LEASE = 30.0  # the backends' default lease (a Redis min_idle of 30 in the fixture)


# The outage is simulated: one server's Redis variants say it all, and a stream source
# (whose claims and leases are the list's) runs the one-lease outage alone.
_STREAM_ALSO = 1


@pytest.mark.not_on_cluster
@pytest.mark.parametrize(
    "leases",
    [
        n if n == _STREAM_ALSO else pytest.param(n, marks=pytest.mark.not_on_stream)
        for n in (0.5, 1, 2, 5)
    ],
    ids=lambda n: f"{n}x-lease",
)
async def test_an_outage_runs_no_job_twice_and_loses_none(
    make_backend: MakeBackend, autojump_clock: trio.testing.MockClock, leases: float
):
    backend = await make_backend()
    assert backend.default_lease == LEASE
    queue = Queue(backend)
    for n in range(2):  # a worker claims these, then dies before the outage
        await queue.enqueue(f"orphan-{n}", id=f"orphan-{n}")
    orphans = await backend.claim(2, lease=LEASE, block=0)
    assert len(orphans) == 2
    runs: collections.Counter[str] = collections.Counter()

    async def slow(job: trioqueue.Job) -> None:
        runs[job.id] += 1
        await trio.sleep(2 * LEASE)  # runs through the outage

    begin = trio.current_time() + 5
    window = (begin, begin + leases * LEASE)
    async with trio.open_nursery() as nursery:

        async def pool(name: str) -> None:
            through = Outages(backend, window)
            async with trioqueue.open_worker_pool(
                through, slow, workers=4, prefetch=0, lease=LEASE, sweep_interval=5
            ):
                for n in range(4):
                    await queue.enqueue(f"{name}-{n}", id=f"{name}-{n}")

        nursery.start_soon(pool, "a")
        nursery.start_soon(pool, "b")
    expected = {f"{p}-{n}" for p in "ab" for n in range(4)}
    if make_backend.redelivers:  # the dead worker's jobs run once, elsewhere
        expected |= {claim.job.id for claim in orphans}
    assert set(runs) == expected
    assert [job for job, count in runs.items() if count != 1] == []  # none ran twice
    snap = await backend.stats()
    assert snap.succeeded == len(expected)
    # an at-most-once queue never runs a job whose worker died holding it: dead letters
    assert snap.dead_lettered == (0 if make_backend.redelivers else 2)
    assert snap.conserved
