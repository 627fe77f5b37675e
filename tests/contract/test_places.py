"""Where the jobs are: `Queue.job_ids` by place, next in turn first, on every backend.

A stream source has no levels, capacity or due times (``test_redis_streams.py``), so
the first test skips it.
"""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue import PLACES, Queue, RetryPolicy


@pytest.mark.not_on_stream
@pytest.mark.server_clock
async def test_each_place_lists_its_jobs_next_in_turn_first(make_backend, autojump_clock):
    backend = await make_backend(capacity=3)
    queue = Queue(backend)

    async def fails(job: trioqueue.Job) -> None:
        raise RuntimeError("dead on purpose")

    async with trioqueue.open_worker_pool(backend, fails, retry=RetryPolicy(max_attempts=1)):
        await queue.enqueue("x", id="dead-1")

    async def done(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(backend, done):
        await queue.enqueue("x", id="done-1")
    await queue.enqueue("x", id="high", priority=2)
    [claim] = await backend.claim(1, lease=30, block=0)
    assert claim.job.id == "high"
    await queue.enqueue("x", id="low", priority=-1)
    await queue.enqueue("x", id="first")
    await queue.enqueue("x", id="second")  # the capacity of 3 is full now
    await queue.submit("x", id="stored-1")
    await queue.submit("x", id="stored-2")
    await queue.enqueue("x", id="later", delay=60)
    await queue.enqueue("x", id="sooner", delay=30)
    await queue.enqueue("x", id="after-high", after=["high"])
    await queue.enqueue("x", id="after-later", after=["later", "high"])
    listed = {place: await queue.job_ids(place) for place in PLACES}
    assert listed == {  #
        "ready": ["first", "second", "low"],  # the highest level first, then in order
        "stored": ["stored-1", "stored-2"],
        "scheduled": ["sooner", "later"],
        "deferred": ["after-high", "after-later"],  # in the order they came
        "claimed": ["high"],
        "dead": ["dead-1"],
        "finished": ["done-1"],
    }
    assert await queue.job_ids("stored", limit=1) == ["stored-1"]
    assert await queue.job_ids("ready", limit=0) == []


@pytest.mark.server_clock
async def test_a_place_that_is_not_one_is_refused_naming_them(make_backend):
    queue = Queue(await make_backend())
    with pytest.raises(
        ValueError, match="ready, stored, scheduled, deferred, claimed, dead, finished"
    ):
        await queue.job_ids("running")
    with pytest.raises(ValueError, match="give a whole number >= 0"):
        await queue.job_ids("ready", limit=-1)
