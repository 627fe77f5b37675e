"""Redis: the followers of a failed job become dead letters in slices, never in one long script.

A failed root of a 100,000-job chain used to make all its followers dead letters
in the script that recorded its failure: seconds during which Redis answered no
one (and past Redis's busy-script limit, every other client got BUSY). Now one
script makes a slice of them; the sweeps that follow make the rest.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue

if TYPE_CHECKING:
    from .redis_server import RedisServer

LONG = 1_600  # over three slices of the scripts' 500


def _backend(server: RedisServer) -> trioqueue.RedisBackend:
    queue = "{f-" + uuid.uuid4().hex[:10] + "}"
    return trioqueue.RedisBackend(server.url, queue=queue, min_idle=30)


async def _fail(backend: trioqueue.RedisBackend, job_id: str) -> None:
    [claim] = await backend.claim(1, lease=30, block=0)
    assert claim.job.id == job_id
    assert await backend.dead_letter(claim, None, "broken")


async def test_a_failed_root_of_a_long_chain_fails_the_rest_in_slices(redis_server):
    ids = [f"c{step}" for step in range(LONG)]
    async with _backend(redis_server) as backend:
        queue = Queue(backend)
        await queue.enqueue_chain(range(LONG), ids=ids)
        await _fail(backend, "c0")
        stats = await backend.stats()
        assert 1 < stats.dead_lettered < LONG, "one script made every follower a dead letter"
        assert stats.gauges.deferred == LONG - stats.dead_lettered
        assert stats.conserved
        # the next in line are still deferred: nothing may run them meanwhile
        assert await backend.claim(1, lease=30, block=0) == []
        await backend.sweep()
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.gauges.deferred) == (LONG, 0)
        assert stats.conserved
        dead = [record.id for record in await queue.dead_letters()]
        assert dead == ids, "a chain's dead letters are not in its order"
        last = await queue.status(ids[-1])
        assert last is not None
        assert last.state is JobState.FAILED
        assert last.reason == (
            f"it was to run after job '{ids[-2]}', which never ran either; "
            "requeue it to run it all the same"
        )
        first = await queue.status("c1")
        assert first is not None
        assert first.reason is not None
        assert "'c0', which failed (it is a dead letter)" in first.reason


async def test_a_wide_fan_out_fails_in_slices_and_each_followers_own_followers_first(
    redis_server,
):
    async with _backend(redis_server) as backend:
        queue = Queue(backend)
        await queue.enqueue("root", id="root")
        wide = [f"w{n}" for n in range(LONG)]
        await queue.enqueue_many(range(LONG), ids=wide, after=["root"])
        await queue.enqueue("after w0", id="w0:next", after=["w0"])
        await _fail(backend, "root")
        early = (await backend.stats()).dead_lettered
        assert 1 < early < LONG
        await backend.sweep()
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.gauges.deferred) == (LONG + 2, 0)
        dead = [record.id for record in await queue.dead_letters()]
        assert dead[:3] == ["root", "w0", "w0:next"]  # depth first, in the order they came
        assert dead[3:] == wide[1:]


async def test_a_follower_requeued_or_replaced_meanwhile_is_left_alone(redis_server):
    """A follower still waiting for its slice that the user requeued from the dead
    letters, or cancelled, is not made a dead letter again when its entry comes."""
    ids = [f"c{step}" for step in range(LONG)]
    async with _backend(redis_server) as backend:
        queue = Queue(backend)
        await queue.enqueue_chain(range(LONG), ids=ids)
        await _fail(backend, "c0")
        assert await queue.cancel(ids[-1]) is trioqueue.CancelResult.CANCELLED
        await backend.sweep()
        last = await queue.status(ids[-1])
        assert last is not None
        assert last.state is JobState.CANCELLED
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.cancelled, stats.gauges.deferred) == (LONG - 1, 1, 0)
        assert stats.conserved


async def test_a_pool_finishes_what_the_failure_left(redis_server):
    """No call but the pool's own sweeps: every follower ends a dead letter."""
    async with _backend(redis_server) as backend:
        queue = Queue(backend)
        await queue.enqueue_chain(
            range(LONG), ids=[f"c{step}" for step in range(LONG)], max_attempts=1
        )

        async def handler(job: trioqueue.Job) -> None:
            raise RuntimeError("the root fails")

        async with trioqueue.open_worker_pool(backend, handler, sweep_interval=0.05) as pool:
            with pytest.raises(trioqueue.JobFailed) as failed, trio.fail_after(30):  # on a hang
                await queue.result(f"c{LONG - 1}")
            assert "never ran either" in str(failed.value)
            pool.mark_producer_finished()
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.gauges.deferred, stats.processed) == (LONG, 0, 1)
